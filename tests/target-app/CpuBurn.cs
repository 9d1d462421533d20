// --burn-cpu: after "ready", the main thread burns CPU forever in two methods of distinct names, called in
// turn straight from Main: CpuBurn.BurnCpuInDsagentFlameProbe does nine times the work of
// CpuBurn.WarmInDsagentFlameProbe, so a CPU profile of the process (dsctl flame, dsctl trace --format pprof)
// has a known hottest method, the widest frame under Main, and a known second one beside it. Each loops in
// its own body (the runtime's first tier inlines nothing, so a shared helper would be the hottest frame),
// and the work is a count of iterations, not a time: reading a clock would put the runtime's clock methods
// under both.
using System.Runtime.CompilerServices;

namespace DsTestTarget;

public static class CpuBurn
{
    public const int HotIterations = 9_000_000;
    public const int WarmIterations = 1_000_000;

    private static double sink;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void BurnCpuInDsagentFlameProbe()
    {
        var x = 1.0;
        for (var i = 0; i < HotIterations; i++)
            x = x * 1.0000001 + 1e-9;
        sink += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WarmInDsagentFlameProbe()
    {
        var x = 1.0;
        for (var i = 0; i < WarmIterations; i++)
            x = x * 1.0000001 + 1e-9;
        sink += x;
    }
}
