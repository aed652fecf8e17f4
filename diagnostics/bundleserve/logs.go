package bundleserve

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// defaultContainerAnnotation names the container kubectl logs picks when none is given.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// serveLog answers pods/<name>/log from the container logs the bundle holds (current, or previous with
// ?previous=true), honouring tailLines and limitBytes; follow returns what there is.
func (srv *Server) serveLog(w http.ResponseWriter, r *http.Request, res *resource, req resourceRequest) {
	pod := res.find(req.namespace, req.name)
	if pod == nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pods %q not found", req.name))
		return
	}
	q := r.URL.Query()
	container := q.Get("container")
	if container == "" {
		var ok bool
		if container, ok = defaultContainer(pod); !ok {
			badRequest(w, fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", req.name, containerNames(pod)))
			return
		}
	}
	previous, _ := strconv.ParseBool(q.Get("previous"))
	p, err := bundle.LogPath(req.namespace, req.name, container, previous)
	if err != nil {
		badRequest(w, fmt.Sprintf("container %q: %v", container, err))
		return
	}
	data, ok := srv.s.files.Get(p)
	if !ok {
		which := "current"
		if previous {
			which = "previous"
		}
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("the support bundle holds no %s log of container %q of pod %s/%s (it collects the logs of the LVMS namespaces' pods, unless --no-logs)",
				which, container, req.namespace, req.name))
		return
	}
	if s := q.Get("tailLines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			badRequest(w, fmt.Sprintf("tailLines=%q: use a number of lines, 0 or more", s))
			return
		}
		data = tail(data, n)
	}
	if s := q.Get("limitBytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			badRequest(w, fmt.Sprintf("limitBytes=%q: use a number of bytes, 1 or more", s))
			return
		}
		data = data[:min(n, len(data))]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(data)
}

// defaultContainer is the container kubectl would pick: the annotated default, or the only one.
func defaultContainer(pod *unstructured.Unstructured) (string, bool) {
	if c := pod.GetAnnotations()[defaultContainerAnnotation]; c != "" {
		return c, true
	}
	if names := containerNames(pod); len(names) == 1 {
		return names[0], true
	}
	return "", false
}

func containerNames(pod *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	var out []string
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// tail is the last n lines of data.
func tail(data []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(data)
	if bytes.HasSuffix(data, []byte("\n")) {
		end--
	}
	i := end
	for range n {
		j := bytes.LastIndexByte(data[:i], '\n')
		if j < 0 {
			return data
		}
		i = j
	}
	return data[i+1:]
}
