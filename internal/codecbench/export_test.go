package codecbench

// BenchCodec lets the benchmarks build the codecs Run measures, seal with
// its random key among them; it is not part of the package's API.
var BenchCodec = newCodec
