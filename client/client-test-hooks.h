/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl's test-only hooks (-Dtest_hooks=true): its own waits made shorter, so that a test can prove how
 * dsctl behaves at the end of a wait without sitting through the real one. In any other build each
 * hook returns what it is given.
 */
#pragma once

/*
 * DSCTL_TEST_AGENT_WAIT_SEC=N, or @seconds: how long dsctl waits for the agent's first answer (60 s
 * for real). A test makes it short to show that dsctl then waits as long as the agent announced.
 */
unsigned client_test_hook_agent_wait(unsigned seconds);
/*
 * DSCTL_TEST_TOOL_WAIT_SEC=N, or @seconds: how long `dsctl port` waits for a tool's request (30 s
 * for real). A test makes it short to show that a tool that says nothing more is let go.
 */
unsigned client_test_hook_tool_wait(unsigned seconds);
