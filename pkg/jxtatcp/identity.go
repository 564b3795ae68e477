package jxtatcp

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// Identity is a JXTA peer's signing identity: an RSA key, its
// self-signed certificate and the peer ID derived from the key.
type Identity struct {
	key  *rsa.PrivateKey
	cert []byte // DER
	id   id.ID
}

// KeyBits is the size of the RSA keys NewIdentity makes. JXSE 2.7 makes
// 1024-bit keys and accepts any size; 2048 bits is the smallest size
// still considered safe.
const KeyBits = 2048

// NewIdentity makes a new RSA key and self-signed certificate.
func NewIdentity() (*Identity, error) {
	key, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: generating the key: %w", err)
	}
	return identityOf(key)
}

func identityOf(key *rsa.PrivateKey) (*Identity, error) {
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: %w", err)
	}
	pid := id.PeerIDFromSPKI(spki)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:       serial,
		Subject:            pkix.Name{CommonName: pid.String()},
		NotBefore:          time.Now().Add(-time.Hour),
		NotAfter:           time.Now().AddDate(20, 0, 0),
		SignatureAlgorithm: x509.SHA256WithRSA,
	}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: creating the certificate: %w", err)
	}
	return &Identity{key: key, cert: cert, id: pid}, nil
}

// ID returns the identity's JXTA peer ID.
func (i *Identity) ID() id.ID { return i.id }

// Certificate returns the identity's certificate, DER-encoded.
func (i *Identity) Certificate() []byte { return i.cert }

// sign signs parts with SHA256withRSA, as CBJX does.
func (i *Identity) sign(parts ...[]byte) ([]byte, error) {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return rsa.SignPKCS1v15(nil, i.key, crypto.SHA256, h.Sum(nil))
}

// maxIdentityFile bounds an identity file: a PEM key and certificate of a
// few KiB.
const maxIdentityFile = 64 << 10

// LoadIdentity reads the identity kept at path (PEM: the PKCS #8 private
// key and the certificate), or creates one there (mode 0600) if the file
// does not exist. A file that is not a small regular file readable only
// by its owner, holding an RSA key and its certificate, is an error; the
// certificate is made again when it does not belong to the key.
func LoadIdentity(path string) (*Identity, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		ident, err := NewIdentity()
		if err != nil {
			return nil, err
		}
		if err := ident.save(path); err != nil {
			return nil, err
		}
		return ident, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: identity: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxIdentityFile {
		return nil, fmt.Errorf("jxtatcp: identity %s: not a regular file of at most %d bytes", path, maxIdentityFile)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("jxtatcp: identity %s: mode %v lets others read the private key (want 0600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: identity: %w", err)
	}
	var key *rsa.PrivateKey
	var cert []byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jxtatcp: identity %s: %w", path, err)
			}
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("jxtatcp: identity %s: not an RSA key", path)
			}
			key = rk
		case "CERTIFICATE":
			cert = blk.Bytes
		}
	}
	if key == nil {
		return nil, fmt.Errorf("jxtatcp: identity %s: no private key", path)
	}
	if n := key.N.BitLen(); n > MaxKeyBits {
		return nil, fmt.Errorf("jxtatcp: identity %s: a key of %d bits, which peers refuse (at most %d)", path, n, MaxKeyBits)
	}
	if c, err := x509.ParseCertificate(cert); err == nil {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
			return &Identity{key: key, cert: cert, id: id.PeerIDFromSPKI(c.RawSubjectPublicKeyInfo)}, nil
		}
	}
	return identityOf(key)
}

func (i *Identity) save(path string) error {
	k, err := x509.MarshalPKCS8PrivateKey(i.key)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.cert})...)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("jxtatcp: saving the identity: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("jxtatcp: saving the identity: %w", err)
	}
	return f.Close()
}
