// --tagged-meter: the Meter "Dsagent.Tagged" (version 2.0, meter tag team=dsagent), whose instruments
// report under two tag values each, so that tests see one row per tag set, the Meter's and the
// instrument's own tags, rates and percentiles:
//   dsagent.test.temperature  ObservableGauge<double>, unit "Cel", instrument tag kind=test:
//                             sensor=a → 21.5, sensor=b → 23.5
//   dsagent.test.requests     Counter<long>, unit "{request}": outcome=ok +5, outcome=failed +1,
//                             every 100 ms of the clock, however loaded the machine
//   dsagent.test.latency      Histogram<double>, unit "ms": route=/a → 10, route=/b → 20, every 10 ms
//   dsagent.test.queue        ObservableUpDownCounter<long>, no unit: 7 (no tags)
using System.Diagnostics.Metrics;

static class TaggedMeter
{
    static Meter? meter;

    public static void Start()
    {
        meter = new Meter(new MeterOptions("Dsagent.Tagged")
        {
            Version = "2.0",
            Tags = new[] { new KeyValuePair<string, object?>("team", "dsagent") },
        });
        meter.CreateObservableGauge("dsagent.test.temperature", () => new[]
        {
            new Measurement<double>(21.5, new KeyValuePair<string, object?>("sensor", "a")),
            new Measurement<double>(23.5, new KeyValuePair<string, object?>("sensor", "b")),
        }, "Cel", "the two sensors' temperatures", new[] { new KeyValuePair<string, object?>("kind", "test") });
        var requests = meter.CreateCounter<long>("dsagent.test.requests", "{request}", "requests by outcome");
        var latency = meter.CreateHistogram<double>("dsagent.test.latency", "ms", "time per request by route");
        meter.CreateObservableUpDownCounter("dsagent.test.queue", () => 7L, null, "items queued");

        new Thread(() =>
        {
            // the pace is the clock's, not the sleeps': a loaded machine wakes this thread late, and then it makes
            // up every 10 ms step that passed, so that what a test counts over a time is that time times the pace
            var clock = System.Diagnostics.Stopwatch.StartNew();
            for (long i = 0; ; Thread.Sleep(10))
            {
                for (var due = clock.ElapsedMilliseconds / 10; i <= due; i++)
                {
                    latency.Record(10, new KeyValuePair<string, object?>("route", "/a"));
                    latency.Record(20, new KeyValuePair<string, object?>("route", "/b"));
                    if (i % 10 == 0)
                    {
                        requests.Add(5, new KeyValuePair<string, object?>("outcome", "ok"));
                        requests.Add(1, new KeyValuePair<string, object?>("outcome", "failed"));
                    }
                }
            }
        }) { IsBackground = true, Name = "tagged-meter" }.Start();
    }
}
