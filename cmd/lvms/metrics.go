package main

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves the Prometheus metrics over HTTPS behind controller-runtime's authentication and
// authorization filter: a scraper's token is checked with a TokenReview and must be allowed `get` on the
// non-resource URL /metrics (ClusterRole lvms-metrics-reader). The certificate is certDir's tls.crt and
// tls.key (a service-ca or cert-manager Secret mounted there), reloaded when it rotates; when certDir holds
// none, for example because an optional Secret does not exist, controller-runtime signs its own.
// metricsCertDirUsage is --metrics-cert-dir's help, the operator's and the node agent's (metricsOptions).
const metricsCertDirUsage = "directory with tls.crt and tls.key for the metrics endpoint (default, or while it holds none: a self-signed certificate)"

func metricsOptions(addr, certDir string) metricsserver.Options {
	return metricsserver.Options{BindAddress: addr, SecureServing: true, CertDir: certDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization}
}
