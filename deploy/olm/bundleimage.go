package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lvms-dev/lvms/image"
)

// Image is the bundle image of dir: a scratch image whose one layer holds manifests/ and metadata/, with the
// bundle annotations as labels (as OLM's registry reads a bundle image). It returns the number of files.
func Image(dir string, created time.Time) (v1.Image, int, error) {
	files := image.NewFiles()
	var n int
	for _, sub := range []string{"manifests", "metadata"} {
		paths, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		slices.Sort(paths)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, 0, err
			}
			files.File(sub+"/"+filepath.Base(p), 0o644, b)
			n++
		}
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("%s holds no bundle: run `make generate`", dir)
	}
	img, err := image.Scratch(created, v1.Config{Labels: Annotations()}, files)
	return img, n, err
}
