package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// legacyPSKName is the name the command line gave every pre-shared key
// before it named keys by their fingerprint (pskName). Keys are still
// known by it when decoding, so that frames and messages sealed then
// still open.
const legacyPSKName = "cli"

// pskName names a pre-shared key by its fingerprint, the first 4 bytes
// of its SHA-256 in hex: the key ID of the elements sealed with it
// ("psk:<name>") then tells which key sealed them, and a receiver holding
// another key says it lacks that one rather than that authentication
// failed. Four bytes of a hash say nothing useful about a 32-byte key.
func pskName(key []byte) string {
	h := sha256.Sum256(key)
	return hex.EncodeToString(h[:4])
}

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

// pskKeyIDs are the key IDs of the elements sealed with the pre-shared
// key: its own and the legacy one.
func (k *codecKeys) pskKeyIDs() []string {
	return []string{"psk:" + pskName(k.psk), "psk:" + legacyPSKName}
}

// sealOptions are seal's options for the keys given: to seal to the
// recipient when there is one and no pre-shared key, with the pre-shared
// key otherwise, and to open what was sealed with either or to the
// identity.
func (k *codecKeys) sealOptions() ([]seal.Option, error) {
	var opts []seal.Option
	if k.psk != nil {
		opts = append(opts, seal.WithPSK(pskName(k.psk), k.psk), seal.WithPSK(legacyPSKName, k.psk))
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
	return opts, nil
}

// codecs builds the codecs of a chain (encoding.ParseChain: compress,
// then encrypt), seal with the keys given, zstd with the first
// dictionary given unless the spec names another by ID, xml and zstd with
// the trained models by name (xml@employees). noKey says which flags give
// seal a key, for the error when none is given.
func (k *codecKeys) codecs(chain, noKey string) ([]encoding.Codec, error) {
	c, err := encoding.ParseChain(chain)
	if err != nil {
		return nil, usageError{err}
	}
	opts := codecbench.ModelOptions()
	sealOpts, err := k.sealOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, encoding.WithFactory(seal.Name, seal.Factory(sealOpts...)))
	if len(k.dicts) > 0 {
		f := zstd.Factory(zstd.WithDictionaries(k.dicts...), zstd.WithEncoderDictionary(k.dicts[0]))
		opts = append(opts, encoding.WithFactory(zstd.Name, f))
	}
	codecs, err := encoding.NewChain(c, opts...)
	switch {
	case errors.Is(err, encoding.ErrNoKey):
		return nil, usageError{fmt.Errorf("%w (give %s)", err, noKey)}
	case errors.Is(err, encoding.ErrSpec):
		return nil, usageError{err}
	case err != nil:
		return nil, err
	}
	return codecs, nil
}

// registry is the default registry with seal and zstd replaced by ones
// that hold the keys and dictionaries given, for decoding.
func (k *codecKeys) registry() (*encoding.Registry, error) {
	sealOpts, err := k.sealOptions()
	if err != nil {
		return nil, err
	}
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
			if c, err = seal.New(sealOpts...); err != nil {
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
		c, err := seal.New(sealOpts...)
		if err != nil {
			return nil, err
		}
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}
