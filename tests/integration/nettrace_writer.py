# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nettrace streams made by hand (NetTrace v4 framing, as tests/fuzz/make-seeds.py writes its seeds), for a
fake runtime to send where the real one would never: the streams of a hostile runtime."""
import os
import struct

SAMPLER = "Microsoft-DotNETCore-SampleProfiler"
RUNTIME = "Microsoft-Windows-DotNETRuntime"
RUNDOWN = "Microsoft-Windows-DotNETRuntimeRundown"
LOGGING = "Microsoft-Extensions-Logging"
BLOCK_HEADER = struct.pack("<HHqq", 20, 1, 0, 0)   # header compression on


def utf16z(text):
    return (text + "\0").encode("utf-16-le", "surrogatepass")


def varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        if not v:
            return out + bytes([b])
        out += bytes([b | 0x80])


def object_type(name, version):
    return b"\x05\x05\x01" + struct.pack("<III", version, version, len(name)) + name + b"\x06"


def metadata(mid, provider, event_id, name, version=0, fields=None):
    """A definition; @fields: V1 fields, (type code, name) each."""
    m = struct.pack("<I", mid) + utf16z(provider) + struct.pack("<I", event_id) + utf16z(name)
    m += struct.pack("<QII", 0, version, 4)
    fields = fields or []
    return m + struct.pack("<I", len(fields)) + b"".join(struct.pack("<I", t) + utf16z(n) for t, n in fields)


def v2_field(name, type_code, element=None, nested=b""):
    body = utf16z(name) + struct.pack("<I", type_code)
    if element is not None:
        body += struct.pack("<I", element)
    return struct.pack("<I", 4 + len(body + nested)) + body + nested


def v2_metadata(mid, provider, event_id, name, fields):
    """A definition whose fields are in V2Params, as LoggingEventSource's ActivityStart has them."""
    head = struct.pack("<I", mid) + utf16z(provider) + struct.pack("<I", event_id) + utf16z(name)
    head += struct.pack("<QII", 0, 0, 4) + struct.pack("<I", 0)
    flist = struct.pack("<I", len(fields)) + b"".join(fields)
    return head + struct.pack("<IB", len(flist), 2) + flist


def event(metadata_id=None, thread=None, stack=None, ts=1, payload=None, activity=None, related=None):
    """One event with a compressed header; what is not given is the previous event's."""
    flags, head = 0, b""
    if metadata_id is not None:
        flags |= 0x01
        head += varint(metadata_id)
    if thread is not None:
        flags |= 0x04
        head += varint(thread)
    if stack is not None:
        flags |= 0x08
        head += varint(stack)
    head += varint(ts)
    if activity is not None:
        flags |= 0x10
        head += activity
    if related is not None:
        flags |= 0x20
        head += related
    if payload is not None:
        flags |= 0x80
        head += varint(len(payload))
    return bytes([flags]) + head + (payload or b"")


class Stream:
    def __init__(self, pid=4242):
        trace = struct.pack("<8H", 2026, 1, 4, 1, 0, 0, 0, 0) + struct.pack("<qqIIII", 0, 10**9, 8, pid, 2, 10**6)
        self.data = (b"Nettrace" + struct.pack("<I", 20) + b"!FastSerialization.1" + object_type(b"Trace", 4) +
                     trace + b"\x06")

    def add(self, name, body):
        out = object_type(name, 2) + struct.pack("<I", len(body))
        out += b"\0" * (-(len(self.data) + len(out)) % 4)
        self.data += out + body + b"\x06"

    def metadata(self, *metas):
        self.add(b"MetadataBlock", BLOCK_HEADER + b"".join(b"\x80\x00" + varint(len(m)) + m for m in metas))

    def stacks(self, first_id, stacks):
        body = struct.pack("<II", first_id, len(stacks))
        for ips in stacks:
            raw = b"".join(struct.pack("<Q", ip) for ip in ips)
            body += struct.pack("<I", len(raw)) + raw
        self.add(b"StackBlock", body)

    def events(self, blobs):
        current = b""
        for blob in blobs:
            if len(current) + len(blob) > 900000:
                self.add(b"EventBlock", BLOCK_HEADER + current)
                current = b""
            current += blob
        if current:
            self.add(b"EventBlock", BLOCK_HEADER + current)

    def end(self):
        return self.data + b"\x01"


def method_payload(start, size, namespace, name):
    """MethodDCEndVerbose: the rundown's name of the code at [start, start + size)."""
    return (struct.pack("<QQQIII", 1, 1, start, size, 0x06000001, 0) + utf16z(namespace) + utf16z(name) +
            utf16z("sig") + struct.pack("<HQ", 0, 0))


MESSAGE_META = metadata(1, LOGGING, 2, "FormattedMessage", fields=[
    (9, "Level"), (9, "FactoryID"), (18, "LoggerName"), (9, "EventId"), (18, "EventName"), (18, "FormattedMessage")])
START_META = v2_metadata(2, LOGGING, 3, "ActivityStart", [
    v2_field("ID", 9), v2_field("FactoryID", 9), v2_field("LoggerName", 18),
    v2_field("Arguments", 19, 1, struct.pack("<I", 2) + v2_field("Key", 18) + v2_field("Value", 18))])


def scope_payload(arguments):
    return (struct.pack("<ii", 1, 1) + utf16z("Cat") + struct.pack("<H", len(arguments)) +
            b"".join(utf16z(k) + utf16z(v) for k, v in arguments))


def message_payload(message, level=3, event_id=5):
    return struct.pack("<ii", level, 1) + utf16z("Cat") + struct.pack("<i", event_id) + utf16z("") + utf16z(message)


def logs_in_scope(arguments, messages, self_parent=False):
    """A scope (ILogger.BeginScope) of @arguments, and @messages logged in it; with @self_parent the scope
    names itself its enclosing scope."""
    activity = bytes(range(1, 17))
    s = Stream()
    s.metadata(MESSAGE_META, START_META)
    blobs = [event(2, thread=7, payload=scope_payload(arguments), activity=activity,
                   related=activity if self_parent else None)]
    for n, message in enumerate(messages):
        blobs.append(event(1, thread=7, ts=2 + n, payload=message_payload(message), activity=activity))
    s.events(blobs)
    return s.end()


def one_stack_on_every_thread(threads, depth, name):
    """The sample profiler's first sample of each thread, all of one stack of @depth frames in one method."""
    s = Stream()
    s.metadata(metadata(1, SAMPLER, 0, "ThreadSample"), metadata(2, RUNDOWN, 144, "MethodDCEndVerbose", version=1))
    s.stacks(1, [[0x100000 + i for i in range(depth)]])
    blobs = [event(1, thread=t, stack=1, ts=10 + t, payload=b"\x01\x00\x00\x00") for t in range(1, threads + 1)]
    blobs.append(event(2, thread=1, stack=0, payload=method_payload(0x100000, 0x10000, "N", name)))
    s.events(blobs)
    return s.end()


def event_counters_meta(mid, provider):
    """An EventSource's "EventCounters" event, as the runtime defines it: one struct field "Payload"."""
    fields = [(18, "Name"), (18, "DisplayName"), (14, "Mean"), (18, "Series"), (18, "CounterType"),
              (18, "Metadata"), (18, "DisplayUnits")]
    nested = struct.pack("<I", len(fields)) + b"".join(struct.pack("<I", t) + utf16z(n) for t, n in fields)
    m = struct.pack("<I", mid) + utf16z(provider) + struct.pack("<I", 0) + utf16z("EventCounters")
    m += struct.pack("<QII", 0, 0, 4)
    return m + struct.pack("<I", 1) + struct.pack("<I", 1) + nested + utf16z("Payload")


def event_counter_payload(name, display_name, mean, metadata="", units="", interval_sec=1):
    return (utf16z(name) + utf16z(display_name) + struct.pack("<d", mean) + utf16z(f"Interval={interval_sec * 1000}")
            + utf16z("Mean") + utf16z(metadata) + utf16z(units))


def event_counters(provider, counters, intervals=4):
    """A stream of @provider's EventCounters: each (name, display name, mean, metadata, units) of @counters once
    a second, @intervals times, as a session of 1 s intervals gets them."""
    stream = Stream()
    stream.metadata(event_counters_meta(1, provider))
    stream.events([event(metadata_id=1, thread=1, stack=0, ts=(i + 1) * 10**9, payload=event_counter_payload(*c))
                   for i in range(intervals) for c in counters])
    return stream.end()


EVENTPIPE = "Microsoft-DotNETCore-EventPipe"


def module_payload(module_id, il_path):
    """ModuleDCEnd (version 2) of the rundown: module @module_id's IL path, no native image, no PDBs."""
    pdb = b"\0" * 16 + struct.pack("<I", 0) + utf16z("")
    return struct.pack("<QQII", module_id, 1, 0, 0) + utf16z(il_path) + utf16z("") + struct.pack("<H", 0) + pdb + pdb


def method_in_module(start, size, module_id, namespace, name, signature="void  ()"):
    """MethodDCEndVerbose of the code at [start, start + size) of a method of module @module_id."""
    return (struct.pack("<QQQIII", start, module_id, start, size, 0x06000001, 0) + utf16z(namespace) + utf16z(name)
            + utf16z(signature) + struct.pack("<HQ", 0, 0))


def cpu_trace(command_line, module_path, methods, threads=2, samples=20, interval=10**6):
    """A sample profiler session of a runtime that names things as it likes: its ProcessInfo says
    @command_line, one module at @module_path, the methods @methods ((namespace, name) each) each a frame of
    every stack, one stack a method deep under the one before; each of @threads threads sampled @samples times
    @interval ns apart, in managed code, walking through the stacks; the rundown last (the module's methods, then
    the module: its name keeps its case, as a real rundown's does)."""
    base, size = 0x7f0000100000, 0x1000
    s = Stream()
    s.metadata(metadata(1, SAMPLER, 0, "ThreadSample"), metadata(2, RUNDOWN, 144, "MethodDCEndVerbose", version=1),
               metadata(3, RUNDOWN, 154, "ModuleDCEnd", version=2), metadata(4, EVENTPIPE, 1, "ProcessInfo"))
    # stack k: the methods 0..k, innermost (k) first
    s.stacks(1, [[base + i * size + 0x10 for i in range(k, -1, -1)] for k in range(len(methods))])
    blobs = [event(4, thread=1, stack=0, ts=1, payload=utf16z(command_line) + utf16z("Linux") + utf16z("x64"))]
    for n in range(samples):
        for t in range(threads):
            blobs.append(event(1, thread=100 + t, stack=1 + (n + t) % len(methods), ts=10**6 + n * interval + t,
                               payload=struct.pack("<I", 2)))
    # the module's methods, then the module, as the runtime's rundown sends them
    for i, (namespace, name) in enumerate(methods):
        blobs.append(event(2, thread=1, stack=0, ts=10**9 + i,
                           payload=method_in_module(base + i * size, size, 7, namespace, name)))
    blobs.append(event(3, thread=1, stack=0, ts=10**9 + len(methods), payload=module_payload(7, module_path)))
    s.events(blobs)
    return s.end()


def flood_stream(directory):
    """A valid stream's head (metadata: EventCounters of a provider no table names), and an EventBlock of 1000
    such samples whose length keeps the 4-byte alignment, so that it can follow itself forever (the fake runtime's
    flood:HEAD:BLOCK). Written into @directory as "head" and "block", readable by all; returns their paths."""
    sample = lambda name: event(metadata_id=1, thread=1, stack=0, ts=1,
                                payload=event_counter_payload(name, "Flood", 1.0))
    for extra in range(4):  # the last sample's name, a UTF-16 unit longer each time, sets the block's length
        stream = Stream()
        stream.metadata(event_counters_meta(1, "Hostile"))
        head = stream.data
        stream.events([sample("flood")] * 999 + [sample("flood" + "x" * extra)])
        block = stream.data[len(head):]
        if len(block) % 4 == 0:
            break
    assert len(block) % 4 == 0, len(block)
    paths = os.path.join(directory, "head"), os.path.join(directory, "block")
    for path, data in zip(paths, (head, block)):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)
    return paths
