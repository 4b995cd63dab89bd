package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/internal/durable"
)

// Head is the side file head.json: the latest signed (seq, hash) of the chain. Truncating the
// log below Seq, or rewriting any record up to it, no longer matches this signature.
type Head struct {
	V    int       `json:"v"`
	Seq  uint64    `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time"`
	File string    `json:"file"`
	Key  string    `json:"key"` // KeyID of the signing key
	Sig  string    `json:"sig"` // base64 ed25519 over HeadMessage(Seq, Hash)
}

// headVersion is the Head.V of heads signed over HeadMessage. Older heads signed
// SignedMessage, the very message a checkpoint signs: a checkpoint's signature then made a
// valid head for the record before it, and anyone with the files could cut the log back to any
// checkpoint and sign the cut with the key's own signature. Verify refuses such a head; the
// daemon replaces it at its first checkpoint after start.
const headVersion = 3

// SignedMessage is what checkpoints sign. The domain prefix keeps these signatures from being
// valid for anything else the key signs, the head included.
func SignedMessage(seq uint64, hash string) []byte {
	return []byte("sandboxd.audit.v1\x00" + strconv.FormatUint(seq, 10) + "\x00" + hash)
}

// KeyID is a short stable name for a public key: the first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// HeadMessage is what a head signs: a message no checkpoint signs, so no checkpoint's signature
// can stand for a head (see headVersion).
func HeadMessage(seq uint64, hash string) []byte {
	return []byte("sandboxd.audit.head.v1\x00" + strconv.FormatUint(seq, 10) + "\x00" + hash)
}

func signHead(key ed25519.PrivateKey, seq uint64, hash string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, HeadMessage(seq, hash)))
}

func verifyHeadSig(pub ed25519.PublicKey, h *Head) bool {
	raw, err := base64.StdEncoding.DecodeString(h.Sig)
	return err == nil && h.V >= headVersion && ed25519.Verify(pub, HeadMessage(h.Seq, h.Hash), raw)
}

func sign(key ed25519.PrivateKey, seq uint64, hash string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, SignedMessage(seq, hash)))
}

func verifySig(pub ed25519.PublicKey, seq uint64, hash, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	return err == nil && ed25519.Verify(pub, SignedMessage(seq, hash), raw)
}

// loadOrCreateKey loads dir/audit.key, or generates the key pair when there is none (created
// says so: Open tells a first start from a lost key by the log beside it). A private key
// readable by group or others is refused rather than used: it may already be known.
func loadOrCreateKey(dir string) (key ed25519.PrivateKey, created bool, err error) {
	path := filepath.Join(dir, keyFile)
	f, err := openRead(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(dir)
		return key, err == nil, err
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat audit key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("%s has mode %v, want 0600: %w", path, st.Mode().Perm(), ErrBadKey)
	}
	b := make([]byte, 4096)
	n, _ := f.Read(b)
	blk, _ := pem.Decode(b[:n])
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, false, fmt.Errorf("%s: no PKCS#8 PEM block: %w", path, ErrBadKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w: %w", path, ErrBadKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, false, fmt.Errorf("%s: not an ed25519 key: %w", path, ErrBadKey)
	}
	return priv, false, nil
}

// moveKey moves a key pair a log kept in its own directory (from) to keyDir, where a copy of
// the log directory no longer carries the signing key. A pair already in keyDir stays; an
// identical private key left in from is removed, a different one is refused: which one signed
// the log is then not for the daemon to guess.
func moveKey(from, keyDir string) (moved bool, err error) {
	if filepath.Clean(from) == filepath.Clean(keyDir) {
		return false, nil
	}
	old, err := os.ReadFile(filepath.Join(from, keyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read audit key in the log directory: %w", err)
	}
	cur, err := os.ReadFile(filepath.Join(keyDir, keyFile))
	switch {
	case err == nil && !bytes.Equal(cur, old):
		return false, fmt.Errorf("%s and %s are different signing keys; keep the one that signed this log's checkpoints and remove the other: %w",
			filepath.Join(from, keyFile), filepath.Join(keyDir, keyFile), ErrBadKey)
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		// The public half first, as createKey writes them: a crash between the renames leaves
		// the private key where it is found next time.
		if err := os.Rename(filepath.Join(from, pubFile), filepath.Join(keyDir, pubFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("move audit public key: %w", err)
		}
		if err := os.Rename(filepath.Join(from, keyFile), filepath.Join(keyDir, keyFile)); err != nil {
			return false, fmt.Errorf("move audit key: %w", err)
		}
		if err := durable.SyncDir(keyDir); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("read audit key: %w", err)
	}
	os.Remove(filepath.Join(from, pubFile))
	if err := os.Remove(filepath.Join(from, keyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove the audit key from the log directory: %w", err)
	}
	return true, durable.SyncDir(from)
}

func createKey(dir string) (ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate audit key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("marshal audit key: %w", err)
	}
	// Public key first: a crash in between leaves no private key, so the next start simply
	// generates a new pair, never a private key without its public half.
	if err := durable.WriteFile(filepath.Join(dir, pubFile), MarshalPublicKey(pub)); err != nil {
		return nil, err
	}
	if err := durable.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, err
	}
	return priv, nil
}

// MarshalPublicKey encodes pub as a PKIX "PUBLIC KEY" PEM block (what audit.pub holds).
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // ed25519 keys always marshal
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParsePublicKey decodes a PEM public key as written by MarshalPublicKey.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("no PUBLIC KEY PEM block: %w", ErrBadKey)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("not an ed25519 key: %w", ErrBadKey)
	}
	return pub, nil
}

// LoadPublicKey reads a PEM public key file (e.g. <KeyDir>/audit.pub or an exported copy).
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read public key: %w", err)
	}
	return ParsePublicKey(b)
}

// ReadHead reads a head.json side file.
func ReadHead(path string) (*Head, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit head: %w", err)
	}
	var h Head
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("decode audit head: %w", err)
	}
	return &h, nil
}
