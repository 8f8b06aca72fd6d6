package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// goBuild is one cached build of main packages from the module proxy, done in
// a throwaway tools module so the product's go.mod never sees these modules.
type goBuild struct {
	// name is the cache directory, which carries the version.
	name string
	// require lists module@version entries for the tools module.
	require []string
	// replaceFrom, if set, names a required module whose own go.mod replaces
	// modules with ./staging paths; each such module is replaced with the
	// published version stagingVersion instead, as a module zip lacks ./staging.
	replaceFrom    string
	stagingVersion string
	// binaries maps an output file name to its main package.
	binaries map[string]string
	// ldflags are extra linker flags, such as version stamps.
	ldflags string
	// mainSource, if set, is a main.go placed in the tools module itself, in
	// mainDir ("" for the module root), for a binary assembled from a
	// module's packages; its package is the module path joined with mainDir.
	mainSource string
	mainDir    string
	// tags are build tags, for modules that leave optional parts out by tag.
	tags []string
	// moduleDir, if set, is a tools module kept in the repository with its
	// own go.mod and go.sum, built as it is (-mod=readonly) so that its
	// go.sum decides every version; require, replaceFrom and mainSource are
	// then unused, and name must carry moduleKey so an edit builds anew.
	moduleDir string
}

func (l Layout) binCacheDir(name string) string { return filepath.Join(l.CacheDir, "bin", name) }

// ensureBuilt builds the binaries unless a complete cached copy exists and
// returns the directory holding them.
func (l Layout) ensureBuilt(ctx context.Context, p *Progress, b goBuild) (string, error) {
	dir := l.binCacheDir(b.name)
	stamp := filepath.Join(dir, ".complete")
	if _, err := os.Stat(stamp); err == nil {
		return dir, nil
	}
	// go test runs packages in parallel processes, and on a cold cache several
	// ask for the same build at once. Unlocked, they shared the src and
	// .partial directories, and the last to finish replaced the directory an
	// earlier one had already handed to its tests (CI: "fork/exec
	// .../etcd-v3.5.35/etcd: no such file or directory"). One builder per name;
	// the others wait and take its result.
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(stamp); err == nil {
		return dir, nil
	}
	p.Printf("building %s (cached afterwards in %s)", b.name, dir)
	began := time.Now()
	stop := p.heartbeat("building "+b.name, 30*time.Second)
	defer stop()

	src, env := b.moduleDir, pinnedGoEnv()
	if src == "" {
		src, env = filepath.Join(l.CacheDir, "src", b.name), goEnv()
		if err := l.writeToolsModule(ctx, src, b); err != nil {
			return "", err
		}
	}
	tmp := dir + ".partial"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	names := make([]string, 0, len(b.binaries))
	for name := range b.binaries {
		names = append(names, name)
	}
	sort.Strings(names)
	flags := []string{"build", "-trimpath", "-ldflags=-s -w " + b.ldflags}
	if len(b.tags) > 0 {
		flags = append(flags, "-tags="+strings.Join(b.tags, ","))
	}
	if b.oneInvocation() {
		// One go build for all packages lets the go command compile and,
		// above all, link them in parallel; linking is single-threaded and
		// dominates the tail of a cold Kubernetes build.
		pkgs := make([]string, 0, len(names))
		for _, name := range names {
			pkgs = append(pkgs, b.binaries[name])
		}
		if err := runGo(ctx, src, env, append(append(flags, "-o", tmp+"/"), pkgs...)...); err != nil {
			return "", fmt.Errorf("failed to build %s: %w", b.name, err)
		}
	} else {
		for _, name := range names {
			out := filepath.Join(tmp, name)
			if err := runGo(ctx, src, env, append(flags, "-o", out, b.binaries[name])...); err != nil {
				return "", fmt.Errorf("failed to build %s from %s: %w", name, b.binaries[name], err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	p.Printf("built %s in %s", b.name, time.Since(began).Round(time.Second))
	return dir, nil
}

// writeToolsModule lays out the throwaway tools module of b in src.
func (l Layout) writeToolsModule(ctx context.Context, src string, b goBuild) error {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	goMod, err := l.toolsGoMod(ctx, src, b)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), goMod, 0o644); err != nil {
		return err
	}
	if b.mainSource == "" {
		return nil
	}
	dir := filepath.Join(src, b.mainDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.mainSource), 0o644)
}

// moduleKey hashes the files of a repository tools module (it has no
// subdirectories), so a cache name that carries it changes with a bumped
// dependency or an edited main.
func moduleKey(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func (b goBuild) modulePath() string {
	return "localcluster.tools/" + strings.ReplaceAll(b.name, ".", "-")
}

// oneInvocation reports whether every binary is named after its package, so
// a single go build -o dir/ writes them all under the right names.
func (b goBuild) oneInvocation() bool {
	if len(b.binaries) < 2 {
		return false
	}
	for name, pkg := range b.binaries {
		if path.Base(pkg) != name {
			return false
		}
	}
	return true
}

func (l Layout) toolsGoMod(ctx context.Context, src string, b goBuild) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "module %s\n\ngo 1.26\n\n", b.modulePath())
	for _, r := range b.require {
		mod, ver, _ := strings.Cut(r, "@")
		fmt.Fprintf(&buf, "require %s %s\n", mod, ver)
	}
	if b.replaceFrom == "" {
		return buf.Bytes(), nil
	}
	staged, err := stagingReplacements(ctx, src, b.replaceFrom)
	if err != nil {
		return nil, err
	}
	buf.WriteString("\n")
	for _, mod := range staged {
		fmt.Fprintf(&buf, "replace %s => %s %s\n", mod, mod, b.stagingVersion)
	}
	return buf.Bytes(), nil
}

// stagingReplacements lists the modules that module@version's own go.mod
// replaces with a ./staging path. It is read from the module itself rather
// than hard-coded, as the list changes between Kubernetes releases.
func stagingReplacements(ctx context.Context, dir, moduleAtVersion string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("failed to download %s: %w: %s", moduleAtVersion, err, stderr.String())
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(out, &info); err != nil || info.GoMod == "" {
		return nil, fmt.Errorf("failed to read the go.mod location of %s: %v", moduleAtVersion, err)
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(info.GoMod, data, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to parse go.mod of %s: %w", moduleAtVersion, err)
	}
	var mods []string
	for _, r := range f.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			mods = append(mods, r.Old.Path)
		}
	}
	if len(mods) == 0 {
		return nil, errors.New("no ./staging replacements found in " + moduleAtVersion)
	}
	sort.Strings(mods)
	return mods, nil
}

func goEnv() []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOWORK=off")
}

// pinnedGoEnv is for a tools module with its own go.sum: nothing is resolved
// anew, and a go.mod that needs a change fails instead of being rewritten.
// Such a module sits in the checkout, where the go command would otherwise
// stamp the binary from git, and fail in a checkout git refuses to read
// (another owner's); the stamp is of no use to a test binary.
func pinnedGoEnv() []string {
	return append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=0", "GOWORK=off")
}

func runGo(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return nil
}

// Binaries are the paths of everything the cluster runs.
type Binaries struct {
	Kubernetes string            // dir with kube-apiserver, kubelet, ..., kubectl
	Etcd       map[string]string // version -> dir with etcd, etcdctl, etcdutl
	CoreDNS    string            // dir with coredns
	LocalPath  string            // dir with local-path-provisioner
	Pause      string            // dir with pause
	// CertManager is the dir with the cert-manager controller.
	CertManager string
	// NetworkPolicy is the dir with kube-network-policies, the enforcer.
	NetworkPolicy string
}

// KubernetesBinary is the path of one Kubernetes component.
func (b Binaries) KubernetesBinary(name string) string { return filepath.Join(b.Kubernetes, name) }

// clusterBuild is the Kubernetes components and CoreDNS in one module and one
// go build. CoreDNS uses client-go and much else that Kubernetes uses; in one
// module it gets the same versions (Kubernetes' staging modules among them),
// so each shared package compiles once instead of once per module. etcd stays
// apart, as its server needs other versions of some of those modules, and so
// does the storage provisioner, which imports logrus under its old
// capitalised path: one build cannot hold both spellings.
func clusterBuild(v Versions) goBuild {
	bins := map[string]string{}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		bins[c] = "k8s.io/kubernetes/cmd/" + c
	}
	b := goBuild{
		name: "kubernetes-" + v.Kubernetes + "-coredns-" + v.CoreDNS,
		require: []string{
			"k8s.io/kubernetes@" + v.Kubernetes,
			"github.com/coredns/coredns@" + v.CoreDNS,
		},
		replaceFrom:    "k8s.io/kubernetes@" + v.Kubernetes,
		stagingVersion: v.KubernetesStaging,
		binaries:       bins,
		ldflags:        kubernetesVersionLDFlags(v.Kubernetes),
		mainSource:     coreDNSMain,
		mainDir:        "coredns",
	}
	b.binaries["coredns"] = b.modulePath() + "/coredns"
	return b
}

// kubernetesVersionLDFlags stamps the version the release build would, so the
// API server reports v1.x.y rather than v0.0.0-master to clients such as
// Helm and kubectl, which compare against it.
func kubernetesVersionLDFlags(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X "+pkg+".gitVersion="+version,
			"-X "+pkg+".gitMajor="+parts[0],
			"-X "+pkg+".gitMinor="+parts[1],
			"-X "+pkg+".gitTreeState=clean",
			"-X "+pkg+".buildDate=1970-01-01T00:00:00Z",
		)
	}
	return strings.Join(flags, " ")
}

func etcdBuild(version string) goBuild {
	return goBuild{
		name: "etcd-" + version,
		require: []string{
			"go.etcd.io/etcd/server/v3@" + version,
			"go.etcd.io/etcd/etcdctl/v3@" + version,
			"go.etcd.io/etcd/etcdutl/v3@" + version,
		},
		binaries: map[string]string{
			"etcd":    "go.etcd.io/etcd/server/v3",
			"etcdctl": "go.etcd.io/etcd/etcdctl/v3",
			"etcdutl": "go.etcd.io/etcd/etcdutl/v3",
		},
	}
}

// coreDNSMain builds CoreDNS with only the plugins the cluster's Corefile
// uses. The stock main links every plugin, including the cloud providers',
// whose dependencies more than double a cold build.
const coreDNSMain = `package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
`

func localPathBuild(v Versions) goBuild {
	return goBuild{
		name:     "local-path-provisioner-" + v.LocalPathProvisioner,
		require:  []string{"github.com/rancher/local-path-provisioner@" + v.LocalPathProvisioner},
		binaries: map[string]string{"local-path-provisioner": "github.com/rancher/local-path-provisioner"},
	}
}

// EnsureBinaries builds, or finds in the cache, every binary the cluster needs.
// The storage provisioner builds beside the Kubernetes build: its modules
// download and compile while Kubernetes waits on downloads and links its
// binaries, which leaves a core idle. The rest run one after another, as each
// already uses both cores.
func (l Layout) EnsureBinaries(ctx context.Context, p *Progress, v Versions) (Binaries, error) {
	var b Binaries
	type result struct {
		dir string
		err error
	}
	localPath := make(chan result, 1)
	go func() {
		dir, err := l.ensureBuilt(ctx, p, localPathBuild(v))
		localPath <- result{dir, err}
	}()
	var err error
	b.Kubernetes, err = l.ensureBuilt(ctx, p, clusterBuild(v))
	lp := <-localPath
	if err != nil {
		return b, err
	}
	if lp.err != nil {
		return b, lp.err
	}
	b.CoreDNS, b.LocalPath = b.Kubernetes, lp.dir
	b.Etcd = map[string]string{}
	for _, ev := range v.Etcd {
		if b.Etcd[ev], err = l.ensureBuilt(ctx, p, etcdBuild(ev)); err != nil {
			return b, err
		}
	}
	if b.NetworkPolicy, err = l.ensureBuilt(ctx, p, networkPolicyBuild(v)); err != nil {
		return b, err
	}
	if b.Pause, err = l.ensurePause(ctx); err != nil {
		return b, err
	}
	if b.CertManager, err = l.CertManagerBinary(ctx, p); err != nil {
		return b, err
	}
	return b, nil
}

// EtcdBinaries returns the directory holding etcd, etcdctl and etcdutl of one
// etcd version (such as v3.6.16 or 3.6.16), building them once. Tests that
// run etcd outside Kubernetes take their binaries from here.
func (l Layout) EtcdBinaries(ctx context.Context, p *Progress, version string) (string, error) {
	return l.ensureBuilt(ctx, p, etcdBuild("v"+strings.TrimPrefix(version, "v")))
}

// etcdDefault returns the binaries of the default etcd version.
func (b Binaries) etcdDefault(v Versions) string {
	return b.Etcd["v"+strings.TrimPrefix(v.EtcdDefault, "v")]
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// EnvtestAssets returns a directory holding kube-apiserver, etcd and kubectl,
// laid out as controller-runtime's envtest expects, building them if needed.
// API-level tests (CRD validation) run against these real binaries.
func (l Layout) EnvtestAssets(ctx context.Context, p *Progress) (string, error) {
	v, err := LoadVersions(l.RepoRoot)
	if err != nil {
		return "", err
	}
	k8s, err := l.ensureBuilt(ctx, p, clusterBuild(v))
	if err != nil {
		return "", err
	}
	etcdDir, err := l.EtcdBinaries(ctx, p, v.EtcdDefault)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(l.CacheDir, "envtest", v.Kubernetes)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, target := range map[string]string{
		"kube-apiserver": filepath.Join(k8s, "kube-apiserver"),
		"kubectl":        filepath.Join(k8s, "kubectl"),
		"etcd":           filepath.Join(etcdDir, "etcd"),
	} {
		if err := replaceLink(target, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// replaceLink makes link a hard link of target without a moment in which
// link is missing: the directory is shared by every checkout on the
// machine, and a test run starting kube-apiserver from it while another run
// refreshes the links must still find the binaries. A link already right
// is left alone; otherwise a new link is made beside it and renamed over
// it, which is atomic.
//
// A hard link, not a symlink: the kernel names a process's executable by
// the path it was started from, and the cluster's sweep of leftovers
// (LeftoverProcesses) kills whatever runs from the build cache. Through a
// symlink, envtest's kube-apiserver and etcd ran from the cache and died
// whenever a local cluster on the machine came up or went down.
func replaceLink(target, link string) error {
	want, err := os.Stat(target)
	if err != nil {
		return err
	}
	if cur, err := os.Lstat(link); err == nil && os.SameFile(cur, want) {
		return nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Link(target, tmp); err != nil {
		// Another filesystem: a copy serves as well.
		if err := copyExecutable(target, tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
