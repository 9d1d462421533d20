// ClrMDCheck DUMP [DAC] [--type NAME]...
//
// Opens a core dump with Microsoft's own dump reader (ClrMD) and prints one JSON object on
// stdout, so tests can tell that a dump taken through dsagent is a complete, readable .NET dump:
//
//   {"dump": "...", "process_id": N,
//    "runtime_module": ".../libcoreclr.so", "dac": ".../libmscordaccore.so",
//    "managed_threads": N,
//    "threads": [{"managed_id": 1, "os_id": N, "main": true, "finalizer": false,
//                 "frames": ["Type.Method(args)", "[FrameName]", ...]}, ...],
//    "heap": {"can_walk": true, "objects": N, "types": {"System.Byte[]": N, ...}}}
//
// ClrMD reports the version of a .NET 10 runtime as 0.0, so it cannot pick the data access
// component (DAC) itself: it is libmscordaccore.so next to the libcoreclr.so of the dump's
// module list (the runtime the target used), unless DAC names another. "main" is the thread
// whose OS id is the process id. "objects" and "types" are null when the heap cannot be walked;
// "types" counts the objects of each type named with --type.
// Exit status: 0 on success, 1 when the dump cannot be read (missing, truncated, not a .NET
// dump, no DAC), 2 on a usage error.

using System.Text.Encodings.Web;
using System.Text.Json;
using Microsoft.Diagnostics.Runtime;

const int MaxFrames = 256;

string? path = null;
string? dacOverride = null;
var typeNames = new List<string>();
bool usageError = false;
for (int i = 0; i < args.Length; i++)
{
    if (args[i] == "--type" && i + 1 < args.Length)
        typeNames.Add(args[++i]);
    else if (args[i].StartsWith("--", StringComparison.Ordinal))
        usageError = true; // an unknown option, or --type without a name
    else if (path == null)
        path = args[i];
    else if (dacOverride == null)
        dacOverride = args[i];
    else
        usageError = true;
}
if (path == null || usageError)
{
    Console.Error.WriteLine("usage: ClrMDCheck DUMP [DAC] [--type NAME]...");
    return 2;
}

Dictionary<string, object?> result;
try
{
    if (!File.Exists(path))
        throw new FileNotFoundException("no such file", path);

    using DataTarget target = DataTarget.LoadDump(path);
    if (target.ClrVersions.IsEmpty)
        throw new InvalidDataException("no .NET runtime in the dump");
    ClrInfo clrInfo = target.ClrVersions[0];

    string runtimeModule = target.EnumerateModules()
        .Select(m => m.FileName)
        .FirstOrDefault(name => Path.GetFileName(name) == "libcoreclr.so")
        ?? throw new InvalidDataException("no libcoreclr.so in the dump's module list");
    string dacPath = dacOverride ?? Path.Combine(Path.GetDirectoryName(runtimeModule)!, "libmscordaccore.so");
    if (!File.Exists(dacPath))
        throw new FileNotFoundException("no DAC for the dump's runtime", dacPath);

    using ClrRuntime runtime = clrInfo.CreateRuntime(dacPath, ignoreMismatch: true);
    int processId = target.DataReader.ProcessId;

    var threads = new List<Dictionary<string, object?>>();
    foreach (ClrThread thread in runtime.Threads)
    {
        var frames = new List<string>();
        foreach (ClrStackFrame frame in thread.EnumerateStackTrace().Take(MaxFrames))
            frames.Add(FrameText(frame));
        threads.Add(new Dictionary<string, object?>
        {
            ["managed_id"] = thread.ManagedThreadId,
            ["os_id"] = thread.OSThreadId,
            ["alive"] = thread.IsAlive,
            ["main"] = thread.OSThreadId == (uint)processId,
            ["finalizer"] = thread.IsFinalizer,
            ["frames"] = frames,
        });
    }

    ClrHeap heap = runtime.Heap;
    long? objects = null;
    Dictionary<string, long>? types = null;
    if (heap.CanWalkHeap)
    {
        objects = 0;
        types = typeNames.Distinct().ToDictionary(name => name, _ => 0L);
        foreach (ClrObject obj in heap.EnumerateObjects())
        {
            if (obj.IsFree)
                continue;
            objects++;
            string? name = obj.Type?.Name;
            if (name != null && types.TryGetValue(name, out long count))
                types[name] = count + 1;
        }
    }

    result = new Dictionary<string, object?>
    {
        ["dump"] = path,
        ["process_id"] = processId,
        ["runtime_module"] = runtimeModule,
        ["dac"] = dacPath,
        ["managed_threads"] = threads.Count,
        ["threads"] = threads,
        ["heap"] = new Dictionary<string, object?>
        {
            ["can_walk"] = heap.CanWalkHeap,
            ["objects"] = objects,
            ["types"] = types,
        },
    };
}
catch (Exception e)
{
    Console.Error.WriteLine($"ClrMDCheck: cannot read {path}: {e.GetType().Name}: {e.Message}");
    return 1;
}

var options = new JsonSerializerOptions { Encoder = JavaScriptEncoder.UnsafeRelaxedJsonEscaping };
using (var stdout = Console.OpenStandardOutput())
{
    JsonSerializer.Serialize(stdout, result, options);
    stdout.WriteByte((byte)'\n');
}
return 0;

// "Type.Method(args)" for a managed frame, "[FrameName]" for one of the runtime's own.
static string FrameText(ClrStackFrame frame)
{
    ClrMethod? method = frame.Method;
    if (method != null)
        return method.Signature ?? $"{method.Type?.Name}.{method.Name}";
    return $"[{frame.FrameName ?? frame.Kind.ToString()}]";
}
