package localcluster

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestNewPKI_ServingCertVerifiesForEveryHost(t *testing.T) {
	p, err := newPKI(t.TempDir(), []string{"127.0.0.1", "10.0.0.1", "kubernetes.default.svc", "10.0.2.2", "host.lvms.test"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.cert)
	cert := readCert(t, p.path("apiserver.crt"))

	for _, host := range []string{"127.0.0.1", "10.0.0.1", "kubernetes.default.svc", "10.0.2.2", "host.lvms.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	for _, host := range []string{"10.0.2.3", "other.lvms.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err == nil {
			t.Errorf("verify for %s: ok, want an error (not on the certificate)", host)
		}
	}
}

func TestNewPKI_ClientCertsNameUserAndGroups(t *testing.T) {
	p, err := newPKI(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.cert)
	for _, tc := range []struct {
		file, user string
		groups     []string
	}{
		{"admin.crt", "lvms-e2e-admin", []string{"system:masters"}},
		{"apiserver-kubelet-client.crt", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"kube-controller-manager.crt", "system:kube-controller-manager", nil},
		{"kube-scheduler.crt", "system:kube-scheduler", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cert := readCert(t, p.path(tc.file))
			if cert.Subject.CommonName != tc.user || !slices.Equal(cert.Subject.Organization, tc.groups) {
				t.Errorf("subject CN=%q O=%q, want CN=%q O=%q", cert.Subject.CommonName, cert.Subject.Organization, tc.user, tc.groups)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("verify as client certificate: %v", err)
			}
		})
	}
}

func TestFirstIP(t *testing.T) {
	for _, tc := range []struct {
		cidr, want string
		wantErr    bool
	}{
		{cidr: "10.0.0.0/24", want: "10.0.0.1"},
		{cidr: "10.96.0.0/12", want: "10.96.0.1"},
		{cidr: "10.96.3.7/12", want: "10.96.0.1"},
		{cidr: "fd00:10::/108", want: "fd00:10::1"},
		{cidr: "10.0.0.0/32", wantErr: true},
		{cidr: "10.0.0.0", wantErr: true},
	} {
		got, err := firstIP(tc.cidr)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("firstIP(%q) = %q, %v; want %q, error %v", tc.cidr, got, err, tc.want, tc.wantErr)
		}
	}
}
