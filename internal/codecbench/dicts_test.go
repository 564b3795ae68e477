package codecbench

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "train the built-in zstd dictionaries again and write them to dicts/")

// TestEmbeddedDicts: each of Models has an embedded zstd dictionary with
// its ID; -update trains them again and writes them.
func TestEmbeddedDicts(t *testing.T) {
	for _, name := range Models {
		path := filepath.Join("dicts", name+".zdict")
		if *update {
			d, err := newZstdDict(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, d, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		d, err := trainedDict(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d) < 8 || !bytes.Equal(d[:4], []byte("\x37\xa4\x30\xec")) || binary.LittleEndian.Uint32(d[4:8]) != modelID[name] {
			t.Fatalf("%s: not a zstd dictionary with ID %d", name, modelID[name])
		}
	}
}
