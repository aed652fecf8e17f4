// Package tlscert gives an HTTPS server its certificate from a directory holding tls.crt and tls.key (a
// Secret mounted into the pod: OpenShift's service CA, cert-manager, or one an admin made), re-read when the
// files change so a rotated certificate is served without a restart. While the directory holds no
// certificate, for example because the optional Secret does not exist yet, it serves a self-signed one, so
// the endpoint is encrypted from the first second and picks up the real certificate once it appears.
package tlscert

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	certutil "k8s.io/client-go/util/cert"
)

// Source serves the certificate of Dir, or a self-signed one for Host while Dir holds none.
type Source struct {
	// Dir holds tls.crt and tls.key; empty means always self-signed.
	Dir string
	// Host and DNSNames name the self-signed certificate (e.g. the Service's DNS names).
	Host     string
	DNSNames []string

	mu         sync.Mutex
	crt, key   []byte
	current    *tls.Certificate
	selfSigned *tls.Certificate
}

// GetCertificate is tls.Config.GetCertificate. Reading two small files per handshake is cheap next to the
// handshake itself, and needs no watcher that could miss a Secret's atomic symlink swap.
func (s *Source) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	crt, key, err := s.read()
	switch {
	case err == nil:
		if s.current == nil || !bytes.Equal(crt, s.crt) || !bytes.Equal(key, s.key) {
			pair, perr := tls.X509KeyPair(crt, key)
			if perr != nil {
				if s.current != nil {
					return s.current, nil // half-written rotation: keep the last good one
				}
				return nil, fmt.Errorf("the certificate in %s is unusable: %w; fix or delete tls.crt and tls.key", s.Dir, perr)
			}
			s.crt, s.key, s.current = crt, key, &pair
		}
		return s.current, nil
	case errors.Is(err, fs.ErrNotExist):
		if s.current != nil {
			return s.current, nil // the Secret's files vanish for a moment while it is updated
		}
		return s.self()
	default:
		return nil, err
	}
}

func (s *Source) read() (crt, key []byte, err error) {
	if s.Dir == "" {
		return nil, nil, fs.ErrNotExist
	}
	if crt, err = os.ReadFile(filepath.Join(s.Dir, "tls.crt")); err != nil {
		return nil, nil, err
	}
	if key, err = os.ReadFile(filepath.Join(s.Dir, "tls.key")); err != nil {
		return nil, nil, err
	}
	return crt, key, nil
}

func (s *Source) self() (*tls.Certificate, error) {
	if s.selfSigned == nil {
		crt, key, err := certutil.GenerateSelfSignedCertKey(s.Host, nil, s.DNSNames)
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, err
		}
		s.selfSigned = &pair
	}
	return s.selfSigned, nil
}

// Config is a server TLS configuration (TLS 1.2 or later) serving s's certificate.
func (s *Source) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
}
