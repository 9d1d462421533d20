// The target of dsagent's tests and benchmarks: a live .NET runtime with a diagnostic socket.
// It announces itself on stdout, then idles until it is told to stop.
// --allocate-mb N keeps N MiB of managed memory alive, so that heap and full dumps are large.
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
Console.WriteLine($"ready pid={Environment.ProcessId} args={string.Join(' ', args)}");
Console.Out.Flush();
Thread.Sleep(Timeout.Infinite);
GC.KeepAlive(held);
