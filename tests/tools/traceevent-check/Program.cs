// TraceEventCheck FILE.nettrace
//
// Reads a nettrace file with Microsoft's TraceEvent library and prints one JSON
// object on stdout, so tests can compare dsagent's own parser with the reference
// reader:
//
//   {"events": N, "markers": M,
//    "first_marker": {"number": ..., "big": ..., "text": ..., "real": ..., "sequence": ...},
//    "providers": ["distinct", "provider", "names"]}
//
// Markers are the "Marker" events of the test app's EventSource "Dsagent-TestTarget".
// "first_marker" is null when there are none. Exit status: 0 on success, 1 when the
// file cannot be read (missing, truncated, corrupt), 2 on a usage error.

using System.Text.Encodings.Web;
using System.Text.Json;
using Microsoft.Diagnostics.Tracing;

const string MarkerProvider = "Dsagent-TestTarget";
const string MarkerEvent = "Marker";
string[] markerFields = { "number", "big", "text", "real", "sequence" };

if (args.Length != 1)
{
    Console.Error.WriteLine("usage: TraceEventCheck FILE.nettrace");
    return 2;
}

string path = args[0];
long events = 0;
long markers = 0;
Dictionary<string, object?>? firstMarker = null;
var providers = new List<string>();
var seen = new HashSet<string>(StringComparer.Ordinal);

try
{
    if (!File.Exists(path))
        throw new FileNotFoundException("no such file", path);

    using var source = new EventPipeEventSource(path);

    // Every event, whichever parser (or none) decodes it.
    source.AllEvents += data =>
    {
        events++;
        if (seen.Add(data.ProviderName))
            providers.Add(data.ProviderName);
    };

    // EventSource events are decoded from the metadata in the file by the dynamic parser.
    source.Dynamic.All += data =>
    {
        if (data.ProviderName != MarkerProvider || data.EventName != MarkerEvent)
            return;
        markers++;
        if (firstMarker != null)
            return;
        firstMarker = new Dictionary<string, object?>();
        foreach (string name in markerFields)
            firstMarker[name] = data.PayloadByName(name);
    };

    source.Process();
}
catch (Exception e)
{
    Console.Error.WriteLine($"TraceEventCheck: cannot read {path}: {e.GetType().Name}: {e.Message}");
    return 1;
}

var result = new Dictionary<string, object?>
{
    ["events"] = events,
    ["markers"] = markers,
    ["first_marker"] = firstMarker,
    ["providers"] = providers,
};
var options = new JsonSerializerOptions { Encoder = JavaScriptEncoder.UnsafeRelaxedJsonEscaping };
using (var stdout = Console.OpenStandardOutput())
{
    JsonSerializer.Serialize(stdout, result, options);
    stdout.WriteByte((byte)'\n');
}
return 0;
