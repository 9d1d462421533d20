// bench-gcdump's target: OBJECTS small objects in a chain (each references the one before, so the
// heap dump has as many references as objects), kept alive by a static field; then it waits.
var objects = args.Length > 0 && int.TryParse(args[0], out var n) ? n : 100_000;
HeapItem? chain = null;
for (var i = 0; i < objects; i++)
    chain = new HeapItem(chain, i);
Held.Chain = chain;
Console.WriteLine($"ready pid={Environment.ProcessId} objects={objects}");
Console.Out.Flush();
Thread.Sleep(Timeout.Infinite);

sealed record HeapItem(HeapItem? Next, int Value);

static class Held
{
    public static HeapItem? Chain;
}
