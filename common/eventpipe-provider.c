/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an EventPipe session asks for, as data (eventpipe-provider.h): freeing it, and the one provider-name check. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/eventpipe-provider.h"

void eventpipe_config_done(EventPipeConfig *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_providers; i++) {
                free(c->providers[i].name);
                free(c->providers[i].arguments);
        }
        free(c->providers);
        *c = (EventPipeConfig)EVENTPIPE_CONFIG_NULL;
}

bool eventpipe_name_char_is_valid(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
               ch == '-' || ch == '_';
}

bool eventpipe_provider_name_is_valid_n(const char *s, size_t len) {
        assert(s || len == 0);
        if (len == 0 || len > EVENTPIPE_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!eventpipe_name_char_is_valid(s[i]))
                        return false;
        return true;
}

bool eventpipe_provider_name_is_valid(const char *name) {
        return name && eventpipe_provider_name_is_valid_n(name, strlen(name));
}
