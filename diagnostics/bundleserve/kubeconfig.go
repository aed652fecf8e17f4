package bundleserve

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig is a kubeconfig whose current context, named context, reaches server (the bundle server's
// http:// URL) without credentials: the server asks for none and serves only what the bundle holds.
func Kubeconfig(server, context string) ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{context: {Server: server}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{context: {}},
		Contexts:       map[string]*clientcmdapi.Context{context: {Cluster: context, AuthInfo: context}},
		CurrentContext: context,
	})
}
