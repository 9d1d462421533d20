// The target of dsagent's tests and benchmarks: a live .NET runtime with a diagnostic socket.
// It announces itself on stdout, then idles until it is told to stop.
// --allocate-mb N keeps N MiB of managed memory alive, so that heap and full dumps are large.
// --emit-events N writes N Marker events per second from the "Dsagent-TestTarget" EventSource
//   (0: as fast as it can), so that traces have known payloads to find.
// --report-sessions prints "eventsource-enabled True|False" whenever some EventPipe session starts or
//   stops listening to the app's EventSource, so tests see the runtime's own view of its sessions.
// --meter-value V publishes V as the gauge "test-gauge" of the Meter "Dsagent.TestTarget" and as
//   the polling EventCounter "test-counter" of the EventSource, so that counters have a known value.
// --meter-file FILE publishes the same gauge and counter with the number FILE holds whenever a session looks (0 while
//   it holds none), so that a benchmark crosses a line at a moment it knows (bench/bench-collect.py).
// --park-thread, --throw-exceptions N, --log-warnings N: what dsctl stacks, exceptions and logs look for (Diagnostics.cs).
// --exec-when FILE PORTS: once FILE exists, the process runs exec of itself with DOTNET_DiagnosticPorts=PORTS
//   (and without this option), so that one process carries two runtimes, one after the other.
// --saved-uid-root-when FILE: once FILE exists, root becomes the process's saved uid (SavedUid.cs).
// --hold-objects N keeps N small objects of the type HeldItem alive, so that a heap dump has a type of many
//   objects whose first object is small (dsctl gcdump --sort).
// --crash-when FILE throw|failfast: once FILE exists, the process dies of an unhandled exception or FailFast (Crash.cs).
// --burn-cpu: after "ready", Main burns CPU in CpuBurn's two methods in turn, forever (CpuBurn.cs).
// --startup-marker writes one Marker event with sequence -1 before anything else in Main, so that a
//   trace started before the runtime was resumed ([[on_start]]) shows it caught the first instruction.
using System.Diagnostics.Metrics;
using System.Diagnostics.Tracing;

if (Array.IndexOf(args, "--startup-marker") >= 0)
    TestTargetSource.Log.Marker(TestTargetSource.MarkerInt, TestTargetSource.MarkerLong, TestTargetSource.MarkerText,
                                TestTargetSource.MarkerDouble, -1);

var allocateIndex = Array.IndexOf(args, "--allocate-mb");
var held = new List<byte[]>();
if (allocateIndex >= 0 && allocateIndex + 1 < args.Length && int.TryParse(args[allocateIndex + 1], out var megabytes))
{
    for (var i = 0; i < megabytes; i++)
    {
        var block = new byte[1024 * 1024];
        Random.Shared.NextBytes(block); // touched, and not compressible: real pages in the dump
        held.Add(block);
    }
}

var holdIndex = Array.IndexOf(args, "--hold-objects");
var items = new List<HeldItem>();
if (holdIndex >= 0 && holdIndex + 1 < args.Length && int.TryParse(args[holdIndex + 1], out var itemCount))
    for (var i = 0; i < itemCount; i++)
        items.Add(new HeldItem(i));

var meterIndex = Array.IndexOf(args, "--meter-value");
Meter? meter = null;
if (meterIndex >= 0 && meterIndex + 1 < args.Length &&
    double.TryParse(args[meterIndex + 1], System.Globalization.CultureInfo.InvariantCulture, out var meterValue))
{
    meter = new Meter("Dsagent.TestTarget", "1.0");
    meter.CreateObservableGauge("test-gauge", () => meterValue, "items", "the value given by --meter-value");
    TestTargetSource.Log.SetCounter(meterValue);
}

var meterFileIndex = Array.IndexOf(args, "--meter-file");
if (meter is null && meterFileIndex >= 0 && meterFileIndex + 1 < args.Length)
{
    var path = args[meterFileIndex + 1];
    Func<double> read = () =>
    {
        try { return double.Parse(File.ReadAllText(path).Trim(), System.Globalization.CultureInfo.InvariantCulture); }
        catch (Exception e) when (e is IOException or FormatException or UnauthorizedAccessException) { return 0; }
    };
    meter = new Meter("Dsagent.TestTarget", "1.0");
    meter.CreateObservableGauge("test-gauge", read, "items", "the value in the file given by --meter-file");
    TestTargetSource.Log.SetCounter(read);
}

var emitIndex = Array.IndexOf(args, "--emit-events");
if (emitIndex >= 0 && emitIndex + 1 < args.Length && int.TryParse(args[emitIndex + 1], out var perSecond))
    new Thread(() => TestTargetSource.Emit(perSecond)) { IsBackground = true, Name = "emitter" }.Start();

if (args.Contains("--report-sessions"))
    new Thread(TestTargetSource.ReportSessions) { IsBackground = true, Name = "session-reporter" }.Start();

DsTestTarget.DsagentProbe.Start(args); // stacks, exceptions, logs: see Diagnostics.cs
if (args.Contains("--tagged-meter")) TaggedMeter.Start(); // TaggedMeter.cs
DsTestTarget.SavedUid.Start(args); // SavedUid.cs
DsTestTarget.CrashProbe.Start(args); // Crash.cs
Console.WriteLine($"ready pid={Environment.ProcessId} args={string.Join(' ', args)}");
Console.Out.Flush();
var execIndex = Array.IndexOf(args, "--exec-when");
if (execIndex >= 0 && execIndex + 2 < args.Length)
    SelfExec.WhenFileAppears(args, execIndex);
if (args.Contains("--burn-cpu"))
    for (;;)
    {
        DsTestTarget.CpuBurn.BurnCpuInDsagentFlameProbe();
        DsTestTarget.CpuBurn.WarmInDsagentFlameProbe();
    }
Thread.Sleep(Timeout.Infinite);
GC.KeepAlive(held);
GC.KeepAlive(items);
GC.KeepAlive(meter);

// One of the many objects --hold-objects keeps: 24 bytes on a 64-bit runtime.
sealed class HeldItem(int number)
{
    public int Number = number;
}

// Payload constants that tests look for byte for byte in captured traces.
[EventSource(Name = "Dsagent-TestTarget")]
sealed class TestTargetSource : EventSource
{
    public const int MarkerInt = 0x5A5A1234;
    public const long MarkerLong = 0x0123456789ABCDEF;
    public const string MarkerText = "dsagent-marker \u00e9\u20ac";
    public const double MarkerDouble = 2.5;

    public static readonly TestTargetSource Log = new();
    private PollingCounter? counter;

    // A polling counter reports its value every interval, so a session sees it whenever it looks.
    [NonEvent]
    public void SetCounter(double value) => SetCounter(() => value);

    [NonEvent]
    public void SetCounter(Func<double> value) =>
        counter = new PollingCounter("test-counter", this, value) { DisplayName = "Test counter" };

    [Event(1, Level = EventLevel.Informational)]
    public void Marker(int number, long big, string text, double real, int sequence) =>
        WriteEvent(1, number, big, text, real, sequence);

    // The runtime enables an EventSource while at least one session asks for it.
    public static void ReportSessions()
    {
        var reported = false;
        for (;;)
        {
            var enabled = Log.IsEnabled();
            if (enabled != reported)
            {
                Console.WriteLine($"eventsource-enabled {enabled}");
                reported = enabled;
            }
            Thread.Sleep(50);
        }
    }

    public static void Emit(int perSecond)
    {
        for (var sequence = 0; ; sequence++)
        {
            Log.Marker(MarkerInt, MarkerLong, MarkerText, MarkerDouble, sequence);
            if (perSecond > 0)
                Thread.Sleep(1000 / perSecond);
        }
    }
}

// exec(2) of this same program: the pid, its pidfd and its executable stay, the runtime is a new one.
static class SelfExec
{
    [System.Runtime.InteropServices.DllImport("libc", SetLastError = true)]
    private static extern int execve(string path, string?[] argv, string?[] envp);

    public static void WhenFileAppears(string[] args, int index)
    {
        var (trigger, ports) = (args[index + 1], args[index + 2]);
        while (!File.Exists(trigger))
            Thread.Sleep(50);
        var self = Environment.ProcessPath!;
        var argv = new[] { self }.Concat(args.Where((_, i) => i < index || i > index + 2)).Append(null).ToArray();
        var envp = Environment.GetEnvironmentVariables().Cast<System.Collections.DictionaryEntry>()
            .Where(e => (string)e.Key != "DOTNET_DiagnosticPorts").Select(e => $"{e.Key}={e.Value}")
            .Append($"DOTNET_DiagnosticPorts={ports}").Append(null).ToArray();
        execve(self, argv, envp);
        Console.WriteLine($"exec failed: errno {System.Runtime.InteropServices.Marshal.GetLastWin32Error()}");
    }
}
