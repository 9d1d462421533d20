// The target of dsagent's tests: a live .NET runtime with a diagnostic socket.
// It announces itself on stdout, then idles until it is told to stop.
Console.WriteLine($"ready pid={Environment.ProcessId} args={string.Join(' ', args)}");
Console.Out.Flush();
Thread.Sleep(Timeout.Infinite);
