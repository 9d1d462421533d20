// --crash-when FILE MODE: once FILE exists, the process dies as a real .NET app does: MODE "throw" throws an
// InvalidOperationException that nothing catches, from CrashProbe.ThrowUnhandled on a thread of its own; MODE
// "failfast" calls Environment.FailFast from CrashProbe.FailFast. The runtime then aborts (SIGABRT), running
// createdump first when DOTNET_DbgEnableMiniDump=1 says so (tests/systemd/test_crashes.py), and the kernel
// dumps its core where core_pattern says (systemd-coredump, in the SELinux guest). The methods, the exception's
// type and its message are what dotnet-dump analyze must show of the core (clrstack, pe).
namespace DsTestTarget;

public static class CrashProbe
{
    public const string ThrowMessage = "dsagent test crash: unhandled";
    public const string FailFastMessage = "dsagent test crash: failfast";

    public static void Start(string[] args)
    {
        var i = Array.IndexOf(args, "--crash-when");
        if (i < 0 || i + 2 >= args.Length)
            return;
        var trigger = args[i + 1];
        var mode = args[i + 2];
        new Thread(() =>
        {
            while (!File.Exists(trigger))
                Thread.Sleep(50);
            if (mode == "failfast")
                FailFast();
            else
                ThrowUnhandled();
        }) { IsBackground = true, Name = "crash-probe" }.Start();
    }

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    public static void ThrowUnhandled() => throw new InvalidOperationException(ThrowMessage);

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    public static void FailFast() => Environment.FailFast(FailFastMessage);
}
