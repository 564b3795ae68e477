package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestCodecSpecErrors: a bad codec spec is a usage error (exit 2) whose one
// line names what the user typed, not the package that read it.
func TestCodecSpecErrors(t *testing.T) {
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	a := newPipeAdv(t, "unicast")
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"codec", "encode", "--codec", "gzip:x"}, `p2pmsg: bad codec spec "gzip:x": level "x"`},
		{[]string{"codec", "encode", "--codec", "gzip:0"}, `bad codec spec "gzip:0"`},
		{[]string{"codec", "encode", "--codec", "lzma"}, `p2pmsg: bad codec spec "lzma": unknown codec (have `},
		{[]string{"codec", "encode", "--codec", "zstd:99"}, `p2pmsg: bad codec spec "zstd:99": invalid option: zstd level 99`},
		// A chain that does not parse says why, even with a key (before:
		// 'has no seal: nothing would be encrypted').
		{[]string{"codec", "encode", "--codec", "zstd,,seal", "--key", psk}, `bad codec spec "zstd,,seal": codec 2 of 3 (""): name: empty`},
		{[]string{"send", "--pipe", a, "--peer", peer, "--elem", "x=y", "--encode", "zstd:x,seal", "--psk", psk}, `bad codec spec "zstd:x,seal": codec 1 of 2 ("zstd:x")`},
		{[]string{"codec", "encode", "--codec", "seal"}, "(give --key FILE, or --to PEER)"},
		{[]string{"codec", "encode", "--codec", "zstd:9,seal"}, "missing key"},
		{[]string{"codec", "encode", "--codec", "seal:1", "--key", psk}, `bad codec spec "seal:1"`},
		{[]string{"codec", "encode", "--codec", "seal,zstd", "--key", psk}, `bad codec spec "seal,zstd"`},
		{[]string{"codec", "encode", "--codec", "gzip,zstd,seal", "--key", psk}, "3 codecs, want 1 to 2"},
		{[]string{"codec", "encode", "--codec", "gzip:9", "--level", "3"}, "--level"},
		// A key no seal uses: the frame would be in the clear.
		{[]string{"codec", "encode", "--codec", "gzip", "--key", psk}, `--codec "gzip" has no seal`},
		{[]string{"codec", "encode", "--codec", "zstd:3", "--to", "12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY"}, `--codec "zstd:3" has no seal`},
		{[]string{"codec", "encode", "--codec", "xml@nothing"}, `no model "nothing"`},
		{[]string{"lab", "codecs", "--codecs", "zstd:99"}, `bad codec spec "zstd:99"`},
		{[]string{"lab", "codecs", "--corpus", "nothing"}, `--corpus "nothing"`},
		{[]string{"codec", "query", "--path", "/a", "--model", "@nothing"}, `no model "nothing"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := run(t, []byte("<a/>"), tt.args...)
			failsCleanly(t, r)
			if r.code != 2 || !bytes.Contains(r.stderr, []byte(tt.want)) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
			if bytes.Contains(r.stderr, []byte("codecbench")) || bytes.Contains(r.stderr, []byte("cli")) {
				t.Fatalf("stderr %q names an internal package", r.stderr)
			}
		})
	}
}

// TestLevelOutOfRangeNamesTheLevels: a level the codec does not have is a
// usage error naming the codec's levels, whether --codec or --encode
// gave it (before: "xml level 9", and the user had to guess).
func TestLevelOutOfRangeNamesTheLevels(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	for _, tt := range []struct {
		spec, want string
	}{
		{"xml:9", "xml level 9 out of range 1 to 4"},
		{"zstd:30", "zstd level 30 out of range 1 to 22"},
		{"gzip:12", "gzip level 12 out of range -2 to 9"},
	} {
		for _, args := range [][]string{
			{"codec", "encode", "--codec", tt.spec},
			{"send", "--pipe", a, "--peer", peer, "--elem", "x=y", "--encode", tt.spec},
		} {
			r := run(t, []byte("<a/>"), args...)
			failsCleanly(t, r)
			if r.code != 2 || !bytes.Contains(r.stderr, []byte(tt.want)) {
				t.Errorf("%s %s: exit %d, stderr %q; want 2 and %q", args[0], tt.spec, r.code, r.stderr, tt.want)
			}
		}
	}
}

// TestCodecDecodeLegacyPSK: frames sealed when the command line named
// every pre-shared key "cli" still open with the key.
func TestCodecDecodeLegacyPSK(t *testing.T) {
	key := bytes.Repeat([]byte{0xab}, seal.KeySize)
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	sl, err := seal.New(seal.WithPSK("cli", key))
	if err != nil {
		t.Fatal(err)
	}
	s, err := encoding.New([]encoding.Codec{sl}, encoding.WithoutPipeBinding())
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.EncodeElement(message.Element{MIME: "application/octet-stream", Data: []byte("sealed long ago")})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, e.Data, "codec", "decode", "--key", psk)
	if r.code != 0 || string(r.stdout) != "sealed long ago" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	// What codec encode seals now says which key it is.
	enc := run(t, []byte("x"), "codec", "encode", "--codec", "seal", "--key", psk)
	if h, _, err := encoding.ParseHeader(enc.stdout); err != nil || h.Params.KeyID != "psk:9a2db2e2" {
		t.Fatalf("key ID %q, %v (%s)", h.Params.KeyID, err, enc.stderr)
	}
}
