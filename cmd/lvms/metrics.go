package main

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves the Prometheus metrics over HTTPS behind controller-runtime's authentication and
// authorization filter: a scraper's token is checked with a TokenReview and must be allowed `get` on the
// non-resource URL /metrics (ClusterRole lvms-metrics-reader). The certificate is self-signed unless
// certDir holds tls.crt and tls.key (a service-ca or cert-manager secret mounted there).
func metricsOptions(addr, certDir string) metricsserver.Options {
	return metricsserver.Options{BindAddress: addr, SecureServing: true, CertDir: certDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization}
}
