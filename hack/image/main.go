// Command image packs the operator's static manager binary into a minimal,
// non-root image without a container engine and imports it into every node
// of the running local cluster (see test/localcluster). make image runs it.
//
// With -import=false it only builds (or finds cached) the image tarball and
// prints its path, which needs no cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/quorumctl/etcd-operator/test/localcluster"
)

const (
	// pathInImage is the manager's place in the image and its entrypoint.
	pathInImage = "/manager"
	// nonRootUser is the distroless "nonroot" user and group, numeric so the
	// kubelet can enforce runAsNonRoot without resolving names.
	nonRootUser = "65532:65532"
)

func main() {
	ref := flag.String("image", "", "image reference to build, such as localhost/quorumctl/etcd-operator:dev (required)")
	binary := flag.String("binary", "bin/manager", "static manager binary to put into the image")
	repoRoot := flag.String("repo-root", "", "repository root (default: found from the working directory)")
	doImport := flag.Bool("import", true, "import the image into the running local cluster")
	idFile := flag.String("id-file", "bin/operator-image.id", "file to write the image ID to; make deploy puts it in a Pod annotation so that a rebuilt image under the same tag rolls out")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *ref, *binary, *repoRoot, *idFile, *doImport); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ref, binary, repoRoot, idFile string, doImport bool) error {
	if ref == "" {
		return errors.New("-image is required")
	}
	if strings.Contains(ref, "@") {
		return fmt.Errorf("%s: a digest cannot be built, give a tag", ref)
	}
	if repoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if repoRoot, err = localcluster.FindRepoRoot(wd); err != nil {
			return err
		}
	}
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(repoRoot, binary)
	}
	st, err := os.Stat(binary)
	if err != nil {
		return fmt.Errorf("no manager binary (run make build): %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", binary)
	}

	layout, err := localcluster.NewLayout(repoRoot)
	if err != nil {
		return err
	}
	spec := localcluster.StaticBinaryImageSpec(ref, binary, pathInImage)
	spec.User = nonRootUser
	spec.Entrypoint = []string{pathInImage}

	var img localcluster.LocalImage
	if doImport {
		img, err = layout.ImportImage(ctx, spec)
	} else {
		img, err = layout.EnsureImage(spec)
	}
	if err != nil {
		return fmt.Errorf("failed to build image %s: %w", ref, err)
	}
	fmt.Printf("image %s\n  id      %s\n  tarball %s\n", img.Ref, img.ID, img.Tarball)
	if idFile != "" {
		if !filepath.IsAbs(idFile) {
			idFile = filepath.Join(repoRoot, idFile)
		}
		if err := os.WriteFile(idFile, []byte(img.ID+"\n"), 0o644); err != nil {
			return fmt.Errorf("failed to record the image ID: %w", err)
		}
	}
	if doImport {
		fmt.Println("  imported into the local cluster")
	}
	return nil
}
