// Package browsertest runs the web console end to end: served on an httptest server against a real
// kube-apiserver (envtest) holding a prepared state, read through the live informer source as a real user,
// and driven by Debian's chromium through playwright-go. Chromium finds its driver (npm playwright-core,
// installed by e2e/tools/deps.sh, which `make test` runs) without downloading anything.
package browsertest
