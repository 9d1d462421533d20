// IpcClient COMMAND PORT [ARGS]
//
// A stock client of the .NET diagnostic IPC protocol: Microsoft.Diagnostics.NETCore.Client (pinned in
// IpcClient.csproj), connected the way libraries with a DiagnosticPort option connect, through
// DiagnosticsClientConnector.FromDiagnosticPort(PORT). PORT is a --diagnostic-port value, "PATH,connect"
// (what `dsctl port` prints, or a runtime's own dotnet-diagnostic-PID-KEY-socket). Each operation opens
// its own connection to PATH, as the library always does. Commands:
//
//   info PORT                          GetProcessInfo (ProcessInfo3, then 2, then 1, as the library falls back)
//   env PORT [NAME...]                 GetProcessEnvironment: the number of variables; for each NAME
//                                      whether it is there, and its value
//   dump PORT TYPE PATH                WriteDump(TYPE, PATH); TYPE: Normal, WithHeap, Triage, Full (or
//                                      mini, heap, triage, full); PATH is handed over as given
//   trace PORT SECONDS OUTFILE [PROVIDERS] [--no-rundown] [--no-stackwalk] [--rundown-keyword HEX]
//                                      [--buffer-mb N] [--event-ids ID,...] [--block] [--no-stop]
//                                      StartEventPipeSession, the stream copied to OUTFILE; after SECONDS
//                                      session.Stop(), then the rest of the stream up to its end.
//                                      PROVIDERS: Name[:Keywords[:Level[:Key=Value;...]]],... (default
//                                      the test app's "Dsagent-TestTarget" with all keywords, level 4).
//                                      The options choose the CollectTracing version the library sends:
//                                      --no-stackwalk 3, --rundown-keyword 4, --event-ids 5, --block 6,
//                                      else 2. --no-stop closes the stream instead of sending StopTracing.
//   resume PORT                        ResumeRuntime
//   setenv PORT NAME VALUE             SetEnvironmentVariable (code injection, for denial tests)
//   startup-hook PORT PATH             ApplyStartupHook (code injection, for denial tests)
//   perfmap PORT on|off                EnablePerfMap(All) / DisablePerfMap
//
// One JSON object is printed on stdout. On success: the command's results. On failure:
//   {"error": EXCEPTION_TYPE, "message": ..., "hresult": "0x80070005" or null, "inner": [...]}
// and the exit status is 1. The library's exceptions carry the runtime's HRESULT only in their message
// ("... failed - HRESULT: 0x80070005."), so it is read from there. GenerateCoreDump3's error reply carries
// a message, which the library shows instead of the number: "hresult" is then null unless the message
// names it. Some errors the library maps to exception types without the number: UnsupportedCommandException
// for 0x80131385 and 0x80070057, BadEncodingException for 0x80131384. Usage errors exit 2. Progress goes
// to stderr.

using System.Diagnostics.Tracing;
using System.Globalization;
using System.Reflection;
using System.Text.Encodings.Web;
using System.Text.Json;
using System.Text.RegularExpressions;
using Microsoft.Diagnostics.NETCore.Client;

const string MarkerProvider = "Dsagent-TestTarget";

if (args.Length < 2)
    return Usage("a command and a port");

string command = args[0];
string port = args[1];
string[] rest = args[2..];

try
{
    await using DiagnosticsClientConnector connector =
        await DiagnosticsClientConnector.FromDiagnosticPort(port, CancellationToken.None);
    DiagnosticsClient client = connector.Instance;
    Dictionary<string, object?> result = command switch
    {
        "info" => Info(client),
        "env" => Env(client, rest),
        "dump" => rest.Length == 2 ? Dump(client, rest[0], rest[1]) : throw new UsageException("dump PORT TYPE PATH"),
        "trace" => await Trace(client, rest),
        "resume" => Resume(client),
        "setenv" => rest.Length == 2 ? SetEnv(client, rest[0], rest[1])
                                     : throw new UsageException("setenv PORT NAME VALUE"),
        "startup-hook" => rest.Length == 1 ? StartupHook(client, rest[0])
                                           : throw new UsageException("startup-hook PORT PATH"),
        "perfmap" => rest.Length == 1 ? PerfMap(client, rest[0]) : throw new UsageException("perfmap PORT on|off"),
        _ => throw new UsageException($"unknown command '{command}'"),
    };
    Print(result);
    return 0;
}
catch (UsageException e)
{
    return Usage(e.Message);
}
catch (Exception e)
{
    Print(Failure(e));
    return 1;
}

static int Usage(string what)
{
    Console.Error.WriteLine($"IpcClient: usage: {what} (see the head of Program.cs)");
    return 2;
}

static void Print(Dictionary<string, object?> value)
{
    var options = new JsonSerializerOptions { Encoder = JavaScriptEncoder.UnsafeRelaxedJsonEscaping };
    using var stdout = Console.OpenStandardOutput();
    JsonSerializer.Serialize(stdout, value, options);
    stdout.WriteByte((byte)'\n');
}

static Dictionary<string, object?> Failure(Exception e)
{
    // Reflection wraps what an internal method threw.
    while (e is TargetInvocationException { InnerException: not null } tie)
        e = tie.InnerException!;
    var inner = new List<string>();
    for (Exception? i = e.InnerException; i != null; i = i.InnerException)
        inner.Add($"{i.GetType().Name}: {i.Message}");
    Match m = Regex.Match(e.Message, @"HRESULT:? ?0x([0-9A-Fa-f]{8})");
    return new Dictionary<string, object?>
    {
        ["error"] = e.GetType().Name,
        ["message"] = e.Message,
        ["hresult"] = m.Success ? "0x" + m.Groups[1].Value.ToUpperInvariant() : null,
        ["inner"] = inner,
    };
}

// DiagnosticsClient.GetProcessInfo() and the ProcessInfo type are internal in 0.2.750501 (the library's own
// tools reach them through InternalsVisibleTo). They are called by reflection here: it is the very code path
// dotnet-trace, dotnet-counters and dotnet-monitor run, fallbacks included.
static Dictionary<string, object?> Info(DiagnosticsClient client)
{
    const BindingFlags Internal = BindingFlags.Instance | BindingFlags.NonPublic;
    MethodInfo method = typeof(DiagnosticsClient).GetMethod("GetProcessInfo", Internal, Type.EmptyTypes)
        ?? throw new MissingMethodException("DiagnosticsClient.GetProcessInfo() not found in this library version");
    object info = method.Invoke(client, null) ?? throw new InvalidOperationException("GetProcessInfo returned null");
    object? Get(string name) => info.GetType().GetProperty(name, BindingFlags.Instance | BindingFlags.Public |
                                                                   BindingFlags.NonPublic)?.GetValue(info);
    return new Dictionary<string, object?>
    {
        ["ProcessId"] = Get("ProcessId"),
        ["RuntimeInstanceCookie"] = Get("RuntimeInstanceCookie")?.ToString(),
        ["CommandLine"] = Get("CommandLine"),
        ["OperatingSystem"] = Get("OperatingSystem"),
        ["ProcessArchitecture"] = Get("ProcessArchitecture"),
        ["ManagedEntrypointAssemblyName"] = Get("ManagedEntrypointAssemblyName"),
        ["ClrProductVersionString"] = Get("ClrProductVersionString"),
        ["PortableRuntimeIdentifier"] = Get("PortableRuntimeIdentifier"),
    };
}

static Dictionary<string, object?> Env(DiagnosticsClient client, string[] names)
{
    Dictionary<string, string> env = client.GetProcessEnvironment();
    var present = new Dictionary<string, object?>();
    var values = new Dictionary<string, object?>();
    foreach (string name in names)
    {
        present[name] = env.ContainsKey(name);
        values[name] = env.TryGetValue(name, out string? value) ? value : null;
    }
    return new Dictionary<string, object?> { ["count"] = env.Count, ["present"] = present, ["values"] = values };
}

static Dictionary<string, object?> Dump(DiagnosticsClient client, string type, string path)
{
    DumpType dumpType = type.ToLowerInvariant() switch
    {
        "normal" or "mini" => DumpType.Normal,
        "withheap" or "heap" => DumpType.WithHeap,
        "triage" => DumpType.Triage,
        "full" => DumpType.Full,
        _ => throw new UsageException($"dump type Normal, WithHeap, Triage or Full, not '{type}'"),
    };
    var watch = System.Diagnostics.Stopwatch.StartNew();
    client.WriteDump(dumpType, path);
    return new Dictionary<string, object?>
    {
        ["dumped"] = true,
        ["type"] = dumpType.ToString(),
        ["path"] = path,
        ["seconds"] = Math.Round(watch.Elapsed.TotalSeconds, 3),
    };
}

static Dictionary<string, object?> Resume(DiagnosticsClient client)
{
    client.ResumeRuntime();
    return new Dictionary<string, object?> { ["resumed"] = true };
}

static Dictionary<string, object?> SetEnv(DiagnosticsClient client, string name, string value)
{
    client.SetEnvironmentVariable(name, value);
    return new Dictionary<string, object?> { ["set"] = name };
}

static Dictionary<string, object?> StartupHook(DiagnosticsClient client, string path)
{
    client.ApplyStartupHook(path);
    return new Dictionary<string, object?> { ["applied"] = path };
}

static Dictionary<string, object?> PerfMap(DiagnosticsClient client, string onOff)
{
    if (onOff == "on")
        client.EnablePerfMap(PerfMapType.All);
    else if (onOff == "off")
        client.DisablePerfMap();
    else
        throw new UsageException("perfmap PORT on|off");
    return new Dictionary<string, object?> { ["perfmap"] = onOff };
}

static async Task<Dictionary<string, object?>> Trace(DiagnosticsClient client, string[] rest)
{
    var positional = new List<string>();
    bool rundown = true, stackwalk = true, block = false, stop = true;
    long? rundownKeyword = null;
    int bufferMb = 256;
    List<uint>? eventIds = null;
    for (int i = 0; i < rest.Length; i++)
    {
        string NextValue() => i + 1 < rest.Length ? rest[++i] : throw new UsageException($"{rest[i]} takes a value");
        switch (rest[i])
        {
            case "--no-rundown": rundown = false; break;
            case "--no-stackwalk": stackwalk = false; break;
            case "--block": block = true; break;
            case "--no-stop": stop = false; break;
            case "--rundown-keyword": rundownKeyword = ParseHex(NextValue()); break;
            case "--buffer-mb": bufferMb = int.Parse(NextValue(), CultureInfo.InvariantCulture); break;
            case "--event-ids":
                eventIds = NextValue().Split(',').Select(s => uint.Parse(s, CultureInfo.InvariantCulture)).ToList();
                break;
            default:
                if (rest[i].StartsWith("--"))
                    throw new UsageException($"unknown trace option {rest[i]}");
                positional.Add(rest[i]);
                break;
        }
    }
    if (positional.Count is < 2 or > 3)
        throw new UsageException("trace PORT SECONDS OUTFILE [PROVIDERS] [options]");
    double seconds = double.Parse(positional[0], CultureInfo.InvariantCulture);
    string outFile = positional[1];
    string spec = positional.Count == 3 ? positional[2] : $"{MarkerProvider}:0xffffffffffffffff:4";
    EventPipeProviderEventFilter? filter = eventIds == null ? null : new EventPipeProviderEventFilter(true, eventIds);
    List<EventPipeProvider> providers = ParseProviders(spec, filter);

    EventPipeSessionConfiguration config = rundownKeyword is long keyword
        ? new EventPipeSessionConfiguration(providers, bufferMb, keyword, stackwalk,
                                            block ? EventPipeBufferingMode.Block : EventPipeBufferingMode.Drop)
        : new EventPipeSessionConfiguration(providers, bufferMb, rundown ? 0x80020139L : 0L, stackwalk,
                                            block ? EventPipeBufferingMode.Block : EventPipeBufferingMode.Drop);

    // The file is made once the session has started: a refused session leaves none.
    using EventPipeSession session = client.StartEventPipeSession(config);
    using FileStream file = new(outFile, FileMode.CreateNew, FileAccess.Write);
    Console.Error.WriteLine("IpcClient: session started");
    Console.Error.Flush();
    Task copy = session.EventStream.CopyToAsync(file);
    var watch = System.Diagnostics.Stopwatch.StartNew();
    Task finished = await Task.WhenAny(copy, Task.Delay(TimeSpan.FromSeconds(seconds)));
    bool endedEarly = finished == copy;
    if (endedEarly)
        await copy; // the stream ended before we asked: rethrows a failure of the copy
    string stopped;
    if (!stop)
    {
        session.Dispose();
        try { await copy; } catch (Exception) { }
        stopped = "closed";
    }
    else if (endedEarly)
    {
        stopped = "stream-ended";
    }
    else
    {
        session.Stop();
        stopped = "stopped";
        if (await Task.WhenAny(copy, Task.Delay(TimeSpan.FromSeconds(60))) != copy)
            throw new TimeoutException("the stream did not end within 60 s of StopTracing");
        await copy;
    }
    file.Flush();
    return new Dictionary<string, object?>
    {
        ["traced"] = true,
        ["end"] = stopped,
        ["bytes"] = file.Length,
        ["seconds"] = Math.Round(watch.Elapsed.TotalSeconds, 3),
        ["providers"] = providers.Select(p => p.ToString()).ToList(),
    };
}

static long ParseHex(string text) =>
    long.Parse(text.StartsWith("0x", StringComparison.OrdinalIgnoreCase) ? text[2..] : text, NumberStyles.HexNumber,
               CultureInfo.InvariantCulture);

static List<EventPipeProvider> ParseProviders(string spec, EventPipeProviderEventFilter? filter)
{
    var providers = new List<EventPipeProvider>();
    foreach (string one in spec.Split(',', StringSplitOptions.RemoveEmptyEntries))
    {
        string[] parts = one.Split(':', 4);
        long keywords = parts.Length > 1 && parts[1] != "" ? ParseHex(parts[1]) : -1;
        EventLevel level = parts.Length > 2 && parts[2] != ""
            ? (EventLevel)int.Parse(parts[2], CultureInfo.InvariantCulture)
            : EventLevel.Informational;
        Dictionary<string, string>? arguments = null;
        if (parts.Length > 3)
        {
            arguments = new Dictionary<string, string>();
            foreach (string pair in parts[3].Split(';', StringSplitOptions.RemoveEmptyEntries))
            {
                int eq = pair.IndexOf('=');
                arguments[eq < 0 ? pair : pair[..eq]] = eq < 0 ? "" : pair[(eq + 1)..];
            }
        }
        providers.Add(new EventPipeProvider(parts[0], level, keywords, arguments, filter));
    }
    if (providers.Count == 0)
        throw new UsageException("no providers");
    return providers;
}

sealed class UsageException(string message) : Exception(message);
