// What `dsctl stacks`, `dsctl exceptions` and `dsctl logs` look for in the test app, each behind a flag:
// --park-thread        a thread named "dsagent-parked" waits forever inside DsagentProbe.ParkedInDsagentStacksProbe
// --throw-exceptions N N first-chance exceptions a second (at most 1000), of type DsagentProbeException with the
//                      message "dsagent-exception-probe SEQ", thrown by DsagentProbe.ThrowDsagentProbe and caught
// --throw-once-when-watched  once some session asks for the runtime's exception events (a [[collect]] exception
//                      table's watch), one DsagentOnceException with the message "dsagent-once-probe", thrown by
//                      DsagentProbe.ThrowDsagentOnce and caught, then "thrown-once" on stdout and no more: what a
//                      table's action finds of it afterwards, it has from the watch's own event
// --log-warnings N     N ILogger warnings a second (at most 1000) of category "Dsagent.TestTarget.Probe",
//                      "dsagent-log-probe SEQ" with event id 7 (ProbeWarning), inside a scope "probe-scope 42";
//                      each one follows an Information "dsagent-log-info SEQ" of the same category and an
//                      Error "dsagent-log-other SEQ" of "Dsagent.TestTarget.Other", so level and category
//                      filters have something to leave out. Logging goes through Microsoft.Extensions.Logging
//                      and its EventSource provider (LoggingEventSource), at every level.
// --report-sessions    (also) prints "logging-enabled True|False" when sessions start or stop listening to
//                      Microsoft-Extensions-Logging, the runtime's own view of the logs sessions.
using System.Diagnostics.Tracing;
using System.Runtime.CompilerServices;
using Microsoft.Extensions.Logging;

namespace DsTestTarget;

public sealed class DsagentProbeException(string message) : Exception(message);
public sealed class DsagentOnceException(string message) : Exception(message);

public static class DsagentProbe
{
    public const string ParkedThreadName = "dsagent-parked";
    public const string LogCategory = "Dsagent.TestTarget.Probe";
    public const string OtherCategory = "Dsagent.TestTarget.Other";

    private static ILoggerFactory? factory;

    public static void Start(string[] args)
    {
        if (args.Contains("--park-thread"))
            new Thread(ParkedInDsagentStacksProbe) { IsBackground = true, Name = ParkedThreadName }.Start();
        // each thread its own rate: a lambda captures the variable, not its value at Start()
        var throwsPerSecond = RateOf(args, "--throw-exceptions");
        if (throwsPerSecond > 0)
            new Thread(() => Throw(throwsPerSecond)) { IsBackground = true, Name = "dsagent-thrower" }.Start();
        if (args.Contains("--throw-once-when-watched"))
            new Thread(ThrowOnceWhenWatched) { IsBackground = true, Name = "dsagent-thrower-once" }.Start();
        var logsPerSecond = RateOf(args, "--log-warnings");
        if (logsPerSecond > 0)
        {
            factory = LoggerFactory.Create(builder =>
                builder.SetMinimumLevel(LogLevel.Trace).AddEventSourceLogger());
            new Thread(() => Log(logsPerSecond)) { IsBackground = true, Name = "dsagent-logger" }.Start();
        }
        if (args.Contains("--report-sessions"))
            new Thread(ReportLogging) { IsBackground = true, Name = "logging-reporter" }.Start();
    }

    private static int RateOf(string[] args, string flag)
    {
        var i = Array.IndexOf(args, flag);
        return i >= 0 && i + 1 < args.Length && int.TryParse(args[i + 1], out var n) ? Math.Clamp(n, 0, 1000) : 0;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ParkedInDsagentStacksProbe()
    {
        using var never = new ManualResetEventSlim(false);
        never.Wait();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowDsagentProbe(int sequence) =>
        throw new DsagentProbeException($"dsagent-exception-probe {sequence}");

    private static void Throw(int perSecond)
    {
        for (var sequence = 0; ; sequence++)
        {
            try
            {
                ThrowDsagentProbe(sequence);
            }
            catch (DsagentProbeException)
            {
            }
            Thread.Sleep(1000 / perSecond);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowDsagentOnce() => throw new DsagentOnceException("dsagent-once-probe");

    // The runtime's exception events (keyword 0x8000 of Microsoft-Windows-DotNETRuntime) are on while a session asks
    // for them: the managed side of that provider (NativeRuntimeEventSource) says so.
    private static void ThrowOnceWhenWatched()
    {
        const EventKeywords exceptionKeyword = (EventKeywords)0x8000;
        for (;;)
        {
            var runtime = EventSource.GetSources().FirstOrDefault(s => s.Name == "Microsoft-Windows-DotNETRuntime");
            if (runtime is not null && runtime.IsEnabled(EventLevel.Informational, exceptionKeyword))
                break;
            Thread.Sleep(50);
        }
        try
        {
            ThrowDsagentOnce();
        }
        catch (DsagentOnceException)
        {
        }
        Console.WriteLine("thrown-once");
        Console.Out.Flush();
    }

    private static void Log(int perSecond)
    {
        var probe = factory!.CreateLogger(LogCategory);
        var other = factory!.CreateLogger(OtherCategory);
        for (var sequence = 0; ; sequence++)
        {
            using (probe.BeginScope("probe-scope {ScopeId}", 42))
            {
                probe.LogInformation("dsagent-log-info {Sequence}", sequence);
                probe.LogWarning(new EventId(7, "ProbeWarning"), "dsagent-log-probe {Sequence}", sequence);
            }
            other.LogError("dsagent-log-other {Sequence}", sequence);
            Thread.Sleep(1000 / perSecond);
        }
    }

    private static void ReportLogging()
    {
        var reported = false;
        for (;;)
        {
            var source = EventSource.GetSources().FirstOrDefault(s => s.Name == "Microsoft-Extensions-Logging");
            var enabled = source?.IsEnabled() ?? false;
            if (enabled != reported)
            {
                Console.WriteLine($"logging-enabled {enabled}");
                reported = enabled;
            }
            Thread.Sleep(50);
        }
    }
}
