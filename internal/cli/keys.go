package cli

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// pskID names the pre-shared keys the command line uses.
const pskID = "cli"

// pskKeyID is the key ID of elements sealed with the command line's
// pre-shared key (package seal's "psk:<name>").
const pskKeyID = "psk:" + pskID

// defaultKeyFile is where `id` and `recv` keep the identity unless --key
// says otherwise. Its directory, p2pmsg in the user's configuration
// directory, is created (0700) if needed: the only directory the command
// creates for a key; a --key path must be in a directory that exists.
func defaultKeyFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for the identity (give --key): %w", err)
	}
	dir = filepath.Join(dir, "p2pmsg")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("identity directory: %w", err)
	}
	return filepath.Join(dir, "identity.key"), nil
}

// readPSK reads a pre-shared key file: seal.KeySize raw bytes, or that
// many bytes in hex (blanks around it ignored).
func readPSK(path string) ([]byte, error) {
	b, err := readKeyFile(path, 4096, "pre-shared key")
	if err != nil {
		return nil, err
	}
	if len(b) == seal.KeySize {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == seal.KeySize {
		return k, nil
	}
	return nil, fmt.Errorf("pre-shared key %s: want %d bytes, raw or in hex", path, seal.KeySize)
}

// readKeyFile reads a small secret file, refusing before reading it
// anything but a regular file of at most max bytes: a key path naming a
// device would otherwise be read until the bound, and a FIFO would block.
func readKeyFile(path string, max int64, what string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file (%v)", what, path, st.Mode().Type())
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s %s: %d bytes, more than a key's %d", what, path, st.Size(), max)
	}
	return readFileLimited(path, max, what)
}

func readFileLimited(path string, max int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	return readLimited(f, max, what+" "+path)
}

// codecKeys is what the command line gives codecs: pre-shared key,
// identity, recipient and zstd dictionaries.
type codecKeys struct {
	psk       []byte
	identity  crypto.PrivKey
	recipient peer.ID
	dicts     [][]byte
}

func (k *codecKeys) load(pskFile string, dictFiles []string) error {
	if pskFile != "" {
		psk, err := readPSK(pskFile)
		if err != nil {
			return err
		}
		k.psk = psk
	}
	for _, f := range dictFiles {
		d, err := readFileLimited(f, 16<<20, "dictionary")
		if err != nil {
			return err
		}
		k.dicts = append(k.dicts, d)
	}
	return nil
}

// sealCodec is seal with the keys given: to the recipient when there is
// one and no pre-shared key, with the pre-shared key otherwise.
func (k *codecKeys) sealCodec() (*seal.Codec, error) {
	var opts []seal.Option
	if k.psk != nil {
		opts = append(opts, seal.WithPSK(pskID, k.psk))
	} else if k.recipient != "" {
		pub, err := k.recipient.ExtractPublicKey()
		if err != nil {
			return nil, fmt.Errorf("seal: the recipient's key cannot be taken from its peer ID: %w", err)
		}
		opts = append(opts, seal.WithRecipient(pub))
	}
	if k.identity != nil {
		opts = append(opts, seal.WithIdentity(k.identity))
	}
	return seal.New(opts...)
}

// codecs parses a chain "name[:level],…" (compress, then encrypt).
func (k *codecKeys) codecs(chain string) ([]encoding.Codec, error) {
	var out []encoding.Codec
	for _, spec := range strings.Split(chain, ",") {
		spec = strings.TrimSpace(spec)
		name, _, hasLevel := strings.Cut(spec, ":")
		switch {
		case name == seal.Name:
			if hasLevel {
				return nil, usageError{fmt.Errorf("codec %q: seal takes no level", spec)}
			}
			if k.psk == nil && k.recipient == "" {
				return nil, usageError{fmt.Errorf("codec seal needs a key: --psk FILE, or a recipient")}
			}
			c, err := k.sealCodec()
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		case name == zstd.Name && len(k.dicts) > 0:
			opts := []zstd.Option{zstd.WithEncoderDictionary(k.dicts[0])}
			if hasLevel {
				c, err := codecbench.NewCodec(spec) // validates the level the usual way
				if err != nil {
					return nil, usageError{err}
				}
				opts = append(opts, zstd.WithLevel(c.Params().Level))
			}
			c, err := zstd.New(opts...)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		default:
			c, err := codecbench.NewCodec(spec)
			if err != nil {
				return nil, usageError{err}
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 || len(out) > encoding.MaxDepth {
		return nil, usageError{fmt.Errorf("give 1 to %d codecs", encoding.MaxDepth)}
	}
	return out, nil
}

// registry is the default registry with seal and zstd replaced by ones
// that hold the keys and dictionaries given, for decoding.
func (k *codecKeys) registry() (*encoding.Registry, error) {
	r, err := encoding.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, name := range encoding.Default().Names() {
		c, err := encoding.Lookup(name)
		if err != nil {
			return nil, err
		}
		switch name {
		case seal.Name:
			if c, err = k.sealCodec(); err != nil {
				return nil, err
			}
		case zstd.Name:
			if len(k.dicts) > 0 {
				if c, err = zstd.New(zstd.WithDictionaries(k.dicts...)); err != nil {
					return nil, err
				}
			}
		}
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	if _, err := r.Lookup(seal.Name); err != nil { // seal registers no keyless default
		c, err := k.sealCodec()
		if err != nil {
			return nil, err
		}
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}
