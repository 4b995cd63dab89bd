package daemon

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/executor"
	"software.sslmate.com/src/go-pkcs12"
)

// interceptCA is the daemon's TLS interception CA (network.tls_intercept) as kept in the state
// directory: the certificate and a bundle of the host's roots plus it, readable by every
// session (egress-ca/, 0711 like the state dir: reachable by exact path); the key in
// egress-key/ (0700, root's), which the sandbox also hides from every child, root's included.
type interceptCA struct {
	interceptor *egress.Interceptor
	certPath    string // the CA certificate alone (NODE_EXTRA_CA_CERTS adds it to Node's roots)
	bundlePath  string // the host's roots plus the CA (SSL_CERT_FILE and the like)
	javaStore   string // the same as a PKCS#12 trust store, which Java reads and PEM it does not
	keyDir      string
	fingerprint string // SHA-256 of the certificate, hex
}

// caRenewBefore: a CA this close to its end is replaced at start.
const caRenewBefore = 30 * 24 * time.Hour

// systemRoots are where Linux distributions keep the host's root bundle; the first that exists
// is copied into the sessions' bundle (read, never changed: the host's trust store is not
// touched).
var systemRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // RHEL 7+
	"/etc/ssl/cert.pem",                                 // others
}

// loadInterceptCA loads the state directory's interception CA, making a new one when there is
// none, when it is unreadable or mismatched, or when it is about to expire, and writes the
// sessions' bundle anew.
func loadInterceptCA(stateDir string, now time.Time) (*interceptCA, []string, error) {
	pubDir := filepath.Join(stateDir, "egress-ca")
	keyDir := filepath.Join(stateDir, "egress-key")
	for d, mode := range map[string]os.FileMode{pubDir: 0o711, keyDir: 0o700} {
		if err := os.MkdirAll(d, mode); err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", d, err)
		}
		if err := os.Chmod(d, mode); err != nil {
			return nil, nil, fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	certPath, keyPath := filepath.Join(pubDir, "ca.crt"), filepath.Join(keyDir, "ca.key")
	var notes []string
	certPEM, cerr := readRegular(certPath)
	keyPEM, kerr := readRegular(keyPath)
	var icpt *egress.Interceptor
	if cerr == nil && kerr == nil {
		var err error
		icpt, err = egress.NewInterceptor(certPEM, keyPEM)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("the interception CA was unusable (%v); a new one was made", err))
			icpt = nil
		case caExpiresBefore(certPEM, now.Add(caRenewBefore)):
			notes = append(notes, "the interception CA was about to expire; a new one was made")
			icpt = nil
		}
	}
	if icpt == nil {
		host, _ := os.Hostname()
		var err error
		certPEM, keyPEM, err = egress.GenerateCA("sandboxd egress CA "+host+" "+now.UTC().Format("2006-01-02"), now)
		if err != nil {
			return nil, nil, err
		}
		if err := writeReplace(keyPath, keyPEM, 0o600); err != nil {
			return nil, nil, err
		}
		if err := writeReplace(certPath, certPEM, 0o644); err != nil {
			return nil, nil, err
		}
		if icpt, err = egress.NewInterceptor(certPEM, keyPEM); err != nil {
			return nil, nil, err
		}
		if !errors.Is(cerr, fs.ErrNotExist) {
			notes = append(notes, "the interception CA changed: programs that read the old bundle must be restarted")
		}
	}
	var bundle bytes.Buffer
	found := false
	for _, p := range systemRoots {
		if b, err := readRegular(p); err == nil {
			bundle.Write(b)
			if !bytes.HasSuffix(b, []byte("\n")) {
				bundle.WriteByte('\n')
			}
			found = true
			break
		}
	}
	if !found {
		notes = append(notes, "no root bundle of the host was found: sessions trust only the interception CA")
	}
	bundle.WriteString("# sandboxd egress CA: the proxy shows its certificates for HTTPS it inspects\n")
	bundle.Write(certPEM)
	bundlePath := filepath.Join(pubDir, "bundle.pem")
	if err := writeReplace(bundlePath, bundle.Bytes(), 0o644); err != nil {
		return nil, nil, err
	}
	javaStore := filepath.Join(pubDir, "bundle.p12")
	store, err := javaTrustStore(bundle.Bytes())
	if err == nil {
		err = writeReplace(javaStore, store, 0o644)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("java trust store: %w", err)
	}
	b, _ := pem.Decode(certPEM)
	sum := sha256.Sum256(b.Bytes)
	return &interceptCA{
		interceptor: icpt, certPath: certPath, bundlePath: bundlePath, javaStore: javaStore, keyDir: keyDir,
		fingerprint: hex.EncodeToString(sum[:]),
	}, notes, nil
}

// javaTrustStore is the certificates of a PEM bundle as a PKCS#12 trust store under
// executor.JavaStorePassword (the store holds only public certificates: the password is
// Java's convention, not a secret). A certificate Go cannot parse is left out.
func javaTrustStore(bundle []byte) ([]byte, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			certs = append(certs, c)
		}
	}
	return pkcs12.Modern2023.EncodeTrustStore(certs, executor.JavaStorePassword)
}

func caExpiresBefore(certPEM []byte, t time.Time) bool {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return true
	}
	c, err := x509.ParseCertificate(b.Bytes)
	return err != nil || c.NotAfter.Before(t)
}

// readRegular reads a regular file without following a symlink at its last component.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > 16<<20 {
		return nil, fmt.Errorf("%s is larger than 16 MiB", path)
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// writeReplace writes data to a fresh file beside path (O_EXCL|O_NOFOLLOW) and renames it over
// path, so a reader sees the old file or the new one, never a part.
func writeReplace(path string, data []byte, mode os.FileMode) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, mode) // the umask may have narrowed it
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
