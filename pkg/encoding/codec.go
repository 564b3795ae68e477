package encoding

// Params are a codec's parameters as recorded in an encoded element's
// header. Their meaning is the codec's; zero values mean "none/default".
type Params struct {
	Level  int    // compression level as the codec defines it
	DictID uint32 // shared dictionary ID, 0 for none
	KeyID  string // key identifier (pre-shared key name, recipient peer ID)
}

// Binding is what an encoded element is bound to. Codecs that authenticate
// (seal) must bind all of it as associated data, so the payload cannot be
// moved into another element, message header or pipe.
type Binding struct {
	Namespace string
	Name      string
	PipeID    string
	// Header is the encoded element's header (everything before the
	// payload), which records the codec, its parameters and the original
	// MIME type and size.
	Header []byte
	// Unbound is set when the scheme was told, with WithoutPipeBinding,
	// that the element belongs to no pipe; PipeID is then "". An
	// authenticating codec refuses an empty PipeID unless Unbound is set,
	// so that no element is sealed to no pipe by mistake.
	Unbound bool
}

// Kind says what a codec does to bytes, which decides how codecs may
// nest (see New).
type Kind int

const (
	// KindOther is a codec that neither compresses nor authenticates
	// (identity, experiments): it is used alone.
	KindOther Kind = iota
	// KindCompression makes bytes smaller.
	KindCompression
	// KindSeal encrypts and authenticates.
	KindSeal
)

// kinder is implemented by codecs that say what they do. A codec that
// does not is KindOther.
type kinder interface{ Kind() Kind }

// kindOf returns c's kind.
func kindOf(c Codec) Kind {
	if k, ok := c.(kinder); ok {
		return k.Kind()
	}
	return KindOther
}

// Codec is a stateless, concurrency-safe transform of bytes. A configured
// codec (level, dictionaries, keys) is registered under its name; the
// decoder side finds it by the name recorded in the header.
type Codec interface {
	// Name is the codec's registered name, e.g. "zstd". At most 64
	// bytes.
	Name() string
	// Params returns the parameters Encode will use; they are written in
	// the header before Encode is called.
	Params() Params
	// Encode appends the encoding of src to dst and returns it.
	Encode(dst, src []byte, b Binding) ([]byte, error)
	// Decode appends the decoding of src to dst and returns it. It must
	// fail with an error wrapping ErrTooLarge, without allocating for it,
	// if the decoded size would exceed max bytes. p is from the header.
	// It must make room for no more output than src can decode to (what
	// its format lets those bytes hold), growing as output appears: max
	// and any size src records are claims a hostile peer makes freely.
	// ErrNoKey, ErrNoDictionary and ErrUnbound are for refusals before
	// any room is made: such a layer costs its message's budget only its
	// payload's length.
	Decode(dst, src []byte, p Params, b Binding, max int) ([]byte, error)
}
