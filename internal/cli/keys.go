package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/filekind"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
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

// identityFile is the identity key file recv, bridge and id use: keyFile,
// --key's value, or the default file when it is "". Either is refused
// when it names a directory, a FIFO or a device (checkKeyPath).
func identityFile(keyFile string) (string, error) {
	if keyFile != "" {
		return keyFile, checkKeyPath("--key "+keyFile, keyFile)
	}
	path, err := defaultKeyFile()
	if err != nil {
		return "", err
	}
	return path, checkKeyPath("identity key file "+path, path)
}

// checkKeyPath refuses a key path that exists and is not a regular file,
// saying what it is under the flag that named it ("--key /tmp: is a
// directory") before node's key loader refuses it in its own words. A
// path that does not exist is left to the loader, which creates the key
// there, unless it is a symbolic link to a file that does not exist: the
// loader creates a key only where no file is, not through a link, and
// said "file exists" of it.
func checkKeyPath(label, path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if target, err := os.Readlink(path); err == nil {
			return fmt.Errorf("%s: is a symbolic link to %s, which does not exist", label, target)
		}
	}
	if err != nil || st.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: is %s", label, filekind.Of(st.Mode()))
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
// The type is checked on the file opened, which opening does not wait
// for (filekind.OpenRegular), so a path swapped for a FIFO after a check
// of it cannot hold the command.
func readKeyFile(path string, max int64, what string) ([]byte, error) {
	f, st, err := filekind.OpenRegular(path)
	var nr *filekind.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%s %s: is %s", what, path, filekind.Of(nr.Mode))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	if st.Size() > max {
		return nil, fmt.Errorf("%s %s: %d bytes, more than a key's %d", what, path, st.Size(), max)
	}
	return readLimited(f, max, what+" "+path)
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
// identity, recipient, and shared models (--model files: trained xml
// models and zstd dictionaries; --dict files: zstd dictionaries).
type codecKeys struct {
	psk       []byte
	identity  crypto.PrivKey
	recipient peer.ID
	models    encoding.Models
	dictID    uint32      // the first --dict's ID: zstd without @ID compresses with it
	files     []modelFile // the --dict and --model files loaded, in order
}

// modelFile is a --dict or --model file loaded: which flag gave it, and
// the codec and ID a spec names it by (zstd@ID, xml@ID).
type modelFile struct {
	flag, path, codec string
	id                uint32
}

// modelUsage describes the --model flag. It quotes no command in
// backquotes: pflag would show the quoted text as the flag's type.
const modelUsage = "trained model file (from p2pmsg codec train: an xml model or a zstd dictionary) for codecs naming its ID, xml@ID or zstd@ID (repeatable)"

// encodeModelUsage and encodeDictUsage describe --model and --dict where
// they serve an encoder (send, codec encode), which refuses files of
// which its chain uses none (checkUsed).
const (
	encodeModelUsage = modelUsage + "; files of which the chain names none are a usage error"
	encodeDictUsage  = "zstd dictionary file (repeatable): zstd without @ID compresses with the first, zstd@ID with the one of that ID; files of which the chain uses none are a usage error"
)

// maxModelFile bounds a model file: an xml model's samples
// (xmlc.MaxModelSize) and their framing.
const maxModelFile = xmlc.MaxModelSize + 1<<20

func (k *codecKeys) load(pskFile string, dictFiles, modelFiles []string) error {
	if pskFile != "" {
		psk, err := readPSK(pskFile)
		if err != nil {
			return err
		}
		k.psk = psk
	}
	for _, f := range dictFiles {
		d, err := readFileLimited(f, zstd.MaxDictSize, "dictionary")
		if err != nil {
			return err
		}
		codec, id, err := k.models.Add(d)
		if err == nil {
			err = notBuiltin(id, d)
		}
		if err == nil && codec != zstd.Name {
			err = fmt.Errorf("%w: a %s model, not a zstd dictionary", encoding.ErrBadOption, codec)
		}
		if err != nil {
			return fmt.Errorf("--dict %s: %w", f, err)
		}
		if k.dictID == 0 {
			k.dictID = id
		}
		k.files = append(k.files, modelFile{"--dict", f, codec, id})
	}
	for _, f := range modelFiles {
		b, err := readFileLimited(f, maxModelFile, "model")
		if err != nil {
			return err
		}
		codec, id, err := k.models.Add(b)
		if err == nil {
			err = notBuiltin(id, b)
		}
		if err != nil {
			return fmt.Errorf("--model %s: %w", f, err)
		}
		k.files = append(k.files, modelFile{"--model", f, codec, id})
	}
	return nil
}

// checkUsed refuses, as a wrong command line, --dict or --model files of
// which the codecs of chain (given by flag, --encode or --codec) encode
// with none: only zstd takes a dictionary and only a spec naming a
// model's ID (xml@7, zstd:19@9) takes a model, and files nothing uses
// would be read and ignored, the elements encoded without them. The
// first --dict is used by a zstd without @ID. An empty chain (no
// --encode) and auto, whose codecs take no model, use none. One file of
// several going unused is fine: a chain picks from the models given. A
// chain that does not parse is left to building it, which says why.
func (k *codecKeys) checkUsed(flag, chain string) error {
	var c encoding.Chain
	if chain != "" && chain != autoEncode {
		var err error
		if c, err = encoding.ParseChain(chain); err != nil {
			return nil
		}
	}
	uses := func(f modelFile) bool {
		return slices.ContainsFunc(c, func(s encoding.Spec) bool {
			id, byID := s.DictID()
			if !byID && s.Name == zstd.Name && s.Model == "" {
				id = k.dictID
			}
			return s.Name == f.codec && id == f.id
		})
	}
	for _, fl := range []string{"--dict", "--model"} {
		var paths, would []string
		used := false
		for _, f := range k.files {
			if f.flag == fl {
				paths = append(paths, f.path)
				would = append(would, f.usedBy(k.dictID))
				used = used || uses(f)
			}
		}
		if len(paths) == 0 || used {
			continue
		}
		it := "it"
		if len(paths) > 1 {
			it = "them"
		}
		what := fmt.Sprintf("%s %q does not use %s", flag, chain, it)
		if chain == "" {
			what = fmt.Sprintf("nothing uses %s without %s", it, flag)
		}
		return usageError{fmt.Errorf("%s %s: %s (%s would)", fl, strings.Join(paths, ", "), what, strings.Join(would, " or "))}
	}
	return nil
}

// usedBy is the spec that encodes with f; first is the first --dict's ID.
func (f modelFile) usedBy(first uint32) string {
	if f.flag == "--dict" && f.id == first {
		return zstd.Name
	}
	return fmt.Sprintf("%s@%d", f.codec, f.id)
}

// givenIDs returns the IDs of the --dict and --model files for codec.
func (k *codecKeys) givenIDs(codec string) []uint32 {
	var ids []uint32
	for _, f := range k.files {
		if f.codec == codec {
			ids = append(ids, f.id)
		}
	}
	return ids
}

// builtinModelFiles returns the built-in models' files; tests count its
// calls to see when the models are built.
var builtinModelFiles = codecbench.ModelFiles

// builtinRegistry builds the built-in models (codecbench.ModelFiles) and
// returns a registry whose xml and zstd codecs decode with them.
func builtinRegistry() (*encoding.Registry, error) {
	files, err := builtinModelFiles()
	if err != nil {
		return nil, fmt.Errorf("built-in models: %w", err)
	}
	var m encoding.Models
	for _, f := range files {
		if _, _, err := m.Add(f); err != nil {
			return nil, fmt.Errorf("built-in models: %w", err)
		}
	}
	return m.Registry()
}

// builtinModels is a decoding xml or zstd codec, holding the models given
// on the command line, that decodes a layer naming a built-in model's ID
// with the built-in models, built (once, for every codec of the registry)
// when a layer first names one. A layer naming an ID neither has is
// refused by the codec given, naming the ID, as before.
type builtinModels struct {
	encoding.Codec
	given    []uint32 // IDs of the models given: a file may be a built-in model itself (notBuiltin)
	builtins func() (*encoding.Registry, error)
}

// Kind is the codec's: it decides how codecs may nest.
func (b *builtinModels) Kind() encoding.Kind {
	if k, ok := b.Codec.(interface{ Kind() encoding.Kind }); ok {
		return k.Kind()
	}
	return encoding.KindOther
}

func (b *builtinModels) Decode(dst, src []byte, p encoding.Params, bind encoding.Binding, max int) ([]byte, error) {
	if _, builtin := codecbench.BuiltinModel(p.DictID); !builtin || slices.Contains(b.given, p.DictID) {
		return b.Codec.Decode(dst, src, p, bind, max)
	}
	r, err := b.builtins()
	if err != nil {
		return nil, err
	}
	c, err := r.Lookup(b.Name())
	if err != nil {
		return nil, err
	}
	return c.Decode(dst, src, p, bind, max)
}

// builtinID returns an error if id is a built-in model's
// (codecbench.BuiltinModel), which a user's model must not take: a
// receiver given no model file decodes frames naming that ID with the
// built-in one, and one given the file with the file's, so the two would
// disagree on what a sender meant.
func builtinID(id uint32) error {
	if name, ok := codecbench.BuiltinModel(id); ok {
		return fmt.Errorf("ID %d is the built-in %s model's (xml@%s, zstd@%s); train yours with another --id", id, name, name, name)
	}
	return nil
}

// notBuiltin refuses a model file with a built-in model's ID unless it is
// that built-in model's file.
func notBuiltin(id uint32, file []byte) error {
	err := builtinID(id)
	if err == nil {
		return nil
	}
	builtin, ferr := codecbench.ModelFiles()
	if ferr != nil {
		return fmt.Errorf("built-in models: %w", ferr)
	}
	if slices.ContainsFunc(builtin, func(b []byte) bool { return bytes.Equal(b, file) }) {
		return nil
	}
	return err
}

// missingModel adds to an error that says a model or dictionary is
// missing how to give it.
func missingModel(err error) error {
	if errors.Is(err, encoding.ErrNoDictionary) {
		return fmt.Errorf("%w (not loaded: give its file with --model)", err)
	}
	return err
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
// then encrypt): seal with the keys given, xml and zstd with the models
// given when the spec names one by ID (xml@7, zstd:19@9) or with the
// built-in ones by name (xml@employees), and zstd without a model with
// the first --dict given. noKey says which flags give seal a key, for the
// error when none is given.
func (k *codecKeys) codecs(chain, noKey string) ([]encoding.Codec, error) {
	c, err := encoding.ParseChain(chain)
	if err != nil {
		return nil, usageError{err}
	}
	opts := k.models.BuildOptions()
	for i, s := range c {
		if s.Name == zstd.Name && s.Model == "" && k.dictID != 0 {
			c[i].Model = strconv.FormatUint(uint64(k.dictID), 10)
		}
		if _, byID := s.DictID(); s.Model != "" && !byID {
			opts = codecbench.ModelOptions() // a built-in model, by name
		}
	}
	sealOpts, err := k.sealOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, encoding.WithFactory(seal.Name, seal.Factory(sealOpts...)))
	codecs, err := encoding.NewChain(c, opts...)
	switch {
	case errors.Is(err, encoding.ErrNoKey):
		return nil, usageError{fmt.Errorf("%w (give %s)", err, noKey)}
	case errors.Is(err, encoding.ErrSpec):
		return nil, usageError{missingModel(err)}
	case err != nil:
		return nil, err
	}
	return codecs, nil
}

// calibrationRegistry returns codecs like reg's, built afresh, for
// measuring this end's decodes (calibratingHost): the encoders
// the measurement builds go with them once it is done, where reg's
// compression codecs, the process's default ones, would keep them (xml's
// best-level zstd tables alone are 34 MB) for the receiver's life. Each is
// its codec at its default level, as in reg, without models, which the
// measurement does not use; seal, built with the keys for each registry,
// is reg's own (identity, which holds nothing, is one value anyway).
func calibrationRegistry(reg *encoding.Registry) (*encoding.Registry, error) {
	out, err := encoding.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, name := range reg.Names() {
		c, err := reg.Lookup(name)
		if err != nil {
			return nil, err
		}
		if name != seal.Name {
			if c, err = encoding.NewCodec(encoding.Spec{Name: name}); err != nil {
				return nil, err
			}
		}
		if err := out.Register(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// calibratingHost is the host recv's pathinfo service serves on: the
// first profile request a peer sends (an --encode auto sender asking for
// the decode profile) runs calibrate, which measures this end's codecs,
// before the service answers it, so that the profile served covers them,
// while a receiver no such sender asks measures nothing: measuring builds
// and runs an encoder of every codec, tens of MB. Requests that arrive
// meanwhile wait for it. A probe does not: a sender probes the path before
// it asks for the profile, and a probe the receiver read only after
// calibrating would time the calibration, not the path (one that took
// over a second, as a slow or busy machine's may, had the sender measure a
// loopback path at 0.3 MB/s rather than 400).
type calibratingHost struct {
	host.Host
	once      *sync.Once
	calibrate func()
}

func (h calibratingHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, func(s network.Stream) {
		handler(&calibratingStream{Stream: s, calibrate: func() { h.once.Do(h.calibrate) }})
	})
}

// profileRequest is the first byte of a pathinfo profile request (see
// pkg/pathinfo's protocol).
const profileRequest = 2

// calibratingStream runs calibrate when the stream's first byte, read by
// the pathinfo service within its own deadlines, is a profile request.
type calibratingStream struct {
	network.Stream
	calibrate func() // nil once the first byte is read
}

func (s *calibratingStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if n > 0 && s.calibrate != nil {
		if p[0] == profileRequest {
			s.calibrate()
		}
		s.calibrate = nil
	}
	return n, err
}

// registry is the default registry with xml and zstd holding the models
// and dictionaries given and seal the keys, for decoding. xml and zstd
// decode with the built-in models too (codecbench.Models): a sender names
// them (xml@employees) with no file, so a receiver needs none either.
// Those are built when a frame first names one (builtinModels), not here:
// training them is most of what a receiver allocates at start, and most
// receivers never see one.
func (k *codecKeys) registry() (*encoding.Registry, error) {
	sealOpts, err := k.sealOptions()
	if err != nil {
		return nil, err
	}
	base, err := k.models.Registry()
	if err != nil {
		return nil, err
	}
	builtins := sync.OnceValues(builtinRegistry)
	r, err := encoding.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, name := range base.Names() {
		c, err := base.Lookup(name)
		if err != nil {
			return nil, err
		}
		switch name {
		case seal.Name:
			if c, err = seal.New(sealOpts...); err != nil {
				return nil, err
			}
		case xmlc.Name, zstd.Name:
			c = &builtinModels{Codec: c, given: k.givenIDs(name), builtins: builtins}
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
