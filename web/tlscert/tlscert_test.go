package tlscert

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// A client connecting over time sees the self-signed certificate until the Secret's files appear, then
// the mounted certificate, then the rotated one; a half-written rotation keeps the last good certificate.
func TestSource_ServesTheMountedCertificateAndItsRotation(t *testing.T) {
	dir := t.TempDir()
	src := &Source{Dir: dir, Host: "lvms-console.lvms-system.svc"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", src.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) // we inspect, not trust
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	install := func(host string) {
		t.Helper()
		crt, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, crt, key)
	}

	if got := served(); !strings.HasPrefix(got, "lvms-console.lvms-system.svc") {
		t.Errorf("without files: served %q, want a self-signed certificate for the Service", got)
	}
	install("first")
	if got := served(); !strings.HasPrefix(got, "first") {
		t.Errorf("after the Secret appeared: served %q, want first", got)
	}
	install("rotated")
	if got := served(); !strings.HasPrefix(got, "rotated") {
		t.Errorf("after rotation: served %q, want rotated", got)
	}
	write(t, dir, []byte("-----BEGIN CERTIFICATE-----\ntruncated"), []byte("x"))
	if got := served(); !strings.HasPrefix(got, "rotated") {
		t.Errorf("during a half-written rotation: served %q, want the last good one (rotated)", got)
	}
}

// A broken certificate with nothing good before it is an error naming the directory, not a silent
// self-signed fallback that would hide the admin's mistake.
func TestSource_UnusableCertificateIsAnError(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, []byte("not a certificate"), []byte("not a key"))
	_, err := (&Source{Dir: dir, Host: "h"}).GetCertificate(nil)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("err = %v, want one naming %s", err, dir)
	}
}

func write(t *testing.T, dir string, crt, key []byte) {
	t.Helper()
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
