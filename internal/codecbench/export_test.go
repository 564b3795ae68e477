package codecbench

import "github.com/p2pmsg/p2pmsg/pkg/encoding"

// BenchCodec lets the benchmarks build the codecs Run measures, seal with
// its random key among them; it is not part of the package's API.
func BenchCodec(spec string) (encoding.Codec, error) { return newCodec(spec, nil) }
