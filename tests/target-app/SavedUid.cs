// --saved-uid-root-when FILE: once FILE exists, the process takes root as its saved uid, keeping its real and
// effective ones (setresuid(-1, -1, 0)), and prints "saved-uid-root " and the Uid line of its status file, or
// "setresuid failed: errno N". It needs CAP_SETUID (the test starts it with it as an ambient capability); its
// effective ids stay, so it stays dumpable and its /proc files stay its user's: only the status file's Uid
// line shows the change (issue 35: a reading of the process reused within target_cache_ms).
using System.Runtime.InteropServices;

namespace DsTestTarget;

public static class SavedUid
{
    [DllImport("libc", SetLastError = true)]
    private static extern int setresuid(uint ruid, uint euid, uint suid);

    public static void Start(string[] args)
    {
        var i = Array.IndexOf(args, "--saved-uid-root-when");
        if (i < 0 || i + 1 >= args.Length)
            return;
        var trigger = args[i + 1];
        new Thread(() =>
        {
            while (!File.Exists(trigger))
                Thread.Sleep(50);
            // glibc applies it to every thread of the process, as the kernel's credentials are per thread
            if (setresuid(uint.MaxValue, uint.MaxValue, 0) != 0)
            {
                Console.WriteLine($"setresuid failed: errno {Marshal.GetLastWin32Error()}");
                return;
            }
            var uid = File.ReadLines("/proc/self/status").First(line => line.StartsWith("Uid:"));
            Console.WriteLine($"saved-uid-root {uid}");
        }) { IsBackground = true, Name = "saved-uid-root" }.Start();
    }
}
