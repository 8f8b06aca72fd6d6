// Package rbac finds what the operator's code does to the API server, so a
// test can hold the chart's RBAC rules to it: every rule the chart grants
// must be used by a call in the code, and every call must be granted.
package rbac

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os/exec"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Use is one verb on one resource that the code needs, and where.
type Use struct {
	Permission
	// Where is the file and line of the call that needs it.
	Where string
}

// Permission is one verb on one resource of one API group, as a rule of a
// Role grants it; a subresource is written resource/subresource.
type Permission struct {
	Group, Resource, Verb string
}

func (p Permission) String() string {
	g := p.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s", p.Verb, g, p.Resource)
}

const (
	crFilters  = "sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	crCluster  = "sigs.k8s.io/controller-runtime/pkg/cluster"
	crManager  = "sigs.k8s.io/controller-runtime/pkg/manager"
	crRecorder = "sigs.k8s.io/controller-runtime/pkg/recorder"
	crClient   = "sigs.k8s.io/controller-runtime/pkg/client"
	crBuilder  = "sigs.k8s.io/controller-runtime/pkg/builder"
	crUtil     = "sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Unresolved is a call whose object the analysis cannot map to a kind: its
// static type is an interface. The test fails on it, so a new generic helper
// is noticed instead of silently needing no permission.
type Unresolved struct {
	// Func is the enclosing function, such as
	// etcdmember.(*Reconciler).missingTLSMaterial.
	Func        string
	Call, Where string
}

// Find loads the module's packages that the binary at mainPkg links (run in
// dir, the module root) and returns the permissions their client calls,
// controller watches and owner references need. scheme maps Go types to
// kinds; cached tells whether reads through a client.Client go through the
// manager's cache (which lists and watches what it reads).
func Find(dir, mainPkg string, scheme *runtime.Scheme) ([]Use, []Unresolved, error) {
	_, deps, err := moduleDeps(dir, mainPkg)
	if err != nil {
		return nil, nil, err
	}
	cfg := &packages.Config{
		Dir:  dir,
		Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedFiles,
	}
	pkgs, err := packages.Load(cfg, deps...)
	if err != nil {
		return nil, nil, err
	}
	kinds := kindsByGoType(scheme)
	f := &finder{kinds: kinds}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, nil, fmt.Errorf("loading %s: %v", p.PkgPath, p.Errors[0])
		}
		for _, file := range p.Syntax {
			for _, decl := range file.Decls {
				f.fn = funcName(p.Name, decl)
				ast.Inspect(decl, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.CallExpr:
						f.call(p.Fset, p.TypesInfo, n)
					case *ast.SelectorExpr:
						f.reference(p.Fset, p.TypesInfo, n)
					}
					return true
				})
			}
		}
	}
	sort.Slice(f.uses, func(i, j int) bool { return f.uses[i].String()+f.uses[i].Where < f.uses[j].String()+f.uses[j].Where })
	return f.uses, f.unresolved, nil
}

// moduleDeps lists the packages of the module that mainPkg links.
func moduleDeps(dir, mainPkg string) (string, []string, error) {
	out, err := exec.Command("go", "list", "-C", dir, "-m").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -m: %w", err)
	}
	module := strings.TrimSpace(string(out))
	out, err = exec.Command("go", "list", "-C", dir, "-deps", mainPkg).Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -deps %s: %w", mainPkg, err)
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if p == module || strings.HasPrefix(p, module+"/") {
			deps = append(deps, p)
		}
	}
	return module, deps, nil
}

type goType struct{ pkg, name string }

func kindsByGoType(scheme *runtime.Scheme) map[goType]schema.GroupVersionKind {
	out := map[goType]schema.GroupVersionKind{}
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		k := goType{t.PkgPath(), t.Name()}
		if old, ok := out[k]; ok && old.Version > gvk.Version {
			continue
		}
		out[k] = gvk
	}
	return out
}

// funcName names a declaration as pkg.(*Type).Method or pkg.Func.
func funcName(pkg string, decl ast.Decl) string {
	fd, ok := decl.(*ast.FuncDecl)
	if !ok {
		return pkg
	}
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return pkg + "." + fd.Name.Name
	}
	return pkg + ".(" + types.ExprString(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

type finder struct {
	fn         string
	kinds      map[goType]schema.GroupVersionKind
	uses       []Use
	unresolved []Unresolved
}

func (f *finder) add(fset *token.FileSet, at token.Pos, gvk schema.GroupVersionKind, sub string, verbs ...string) {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	res := plural.Resource
	if sub != "" {
		res += "/" + sub
	}
	pos := fset.Position(at)
	where := fmt.Sprintf("%s:%d", shortPath(pos.Filename), pos.Line)
	for _, v := range verbs {
		f.uses = append(f.uses, Use{Permission{gvk.Group, res, v}, where})
	}
}

func shortPath(p string) string {
	if i := strings.Index(p, "/internal/"); i >= 0 {
		return p[i+1:]
	}
	if i := strings.Index(p, "/cmd/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// kindOf maps the static type of an object argument to its kind; list
// reports a List type, whose items' kind is returned.
func (f *finder) kindOf(t types.Type) (gvk schema.GroupVersionKind, ok bool) {
	if p, isPtr := t.(*types.Pointer); isPtr {
		t = p.Elem()
	}
	n, isNamed := t.(*types.Named)
	if !isNamed || n.Obj().Pkg() == nil {
		return gvk, false
	}
	gvk, ok = f.kinds[goType{n.Obj().Pkg().Path(), n.Obj().Name()}]
	if ok && strings.HasSuffix(gvk.Kind, "List") {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	return gvk, ok
}

// method is the called method's name and the package and name of the
// interface or type that declares it.
func method(info *types.Info, call *ast.CallExpr) (sel *ast.SelectorExpr, fn *types.Func, ok bool) {
	sel, ok = call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil, nil, false
	}
	fn, ok = info.Uses[sel.Sel].(*types.Func)
	return sel, fn, ok && fn.Pkg() != nil
}

func (f *finder) call(fset *token.FileSet, info *types.Info, call *ast.CallExpr) {
	sel, fn, ok := method(info, call)
	if !ok {
		// A package-level function: controllerutil's owner references.
		if id, isIdent := call.Fun.(*ast.SelectorExpr); isIdent {
			if fn, isFn := info.Uses[id.Sel].(*types.Func); isFn && fn.Pkg() != nil && fn.Pkg().Path() == crUtil && fn.Name() == "SetControllerReference" {
				f.ownerRef(fset, info, call)
			}
		}
		return
	}
	switch fn.Pkg().Path() {
	case crClient:
		f.clientCall(fset, info, call, sel, fn)
	case crBuilder:
		switch fn.Name() {
		case "For", "Owns", "Watches":
			f.object(fset, info, call, 0, "", "list", "watch")
		}
	case crUtil:
		if fn.Name() == "SetControllerReference" {
			f.ownerRef(fset, info, call)
		}
	case crCluster, crManager, crRecorder:
		// The manager's event recorders: GetEventRecorder writes
		// events.k8s.io Events, the deprecated GetEventRecorderFor core ones.
		switch fn.Name() {
		case "GetEventRecorder":
			f.add(fset, call.Pos(), schema.GroupVersionKind{Group: "events.k8s.io", Kind: "Event"}, "", "create", "patch")
		case "GetEventRecorderFor":
			f.add(fset, call.Pos(), schema.GroupVersionKind{Kind: "Event"}, "", "create", "patch")
		}
	}
}

// reference: the metrics server's authentication and authorization filter
// asks the API server to review every scrape's token and its access.
func (f *finder) reference(fset *token.FileSet, info *types.Info, sel *ast.SelectorExpr) {
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != crFilters || fn.Name() != "WithAuthenticationAndAuthorization" {
		return
	}
	f.add(fset, sel.Pos(), schema.GroupVersionKind{Group: "authentication.k8s.io", Kind: "TokenReview"}, "", "create")
	f.add(fset, sel.Pos(), schema.GroupVersionKind{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}, "", "create")
}

// ownerRef: a controller reference blocks the owner's deletion, which the
// API server admits only from whoever may update the owner's finalizers.
func (f *finder) ownerRef(fset *token.FileSet, info *types.Info, call *ast.CallExpr) {
	f.object(fset, info, call, 0, "finalizers", "update")
}

func (f *finder) clientCall(fset *token.FileSet, info *types.Info, call *ast.CallExpr, sel *ast.SelectorExpr, fn *types.Func) {
	recv := info.TypeOf(sel.X)
	sub := ""
	if inner, ok := sel.X.(*ast.CallExpr); ok {
		if _, innerFn, ok := method(info, inner); ok && innerFn.Pkg().Path() == crClient {
			switch innerFn.Name() {
			case "Status":
				sub = "status"
			case "SubResource":
				sub = "?"
			}
		}
	}
	// Reads through the manager's client come from its cache, which lists
	// and watches the kind; a bare client.Reader is the API reader.
	cached := recv != nil && types.TypeString(recv, nil) == crClient+".Client" ||
		isEmbeddedClient(info, sel)
	var verbs []string
	arg := 1
	switch fn.Name() {
	case "Get":
		arg, verbs = 2, []string{"get"}
		if cached && sub == "" {
			verbs = append(verbs, "list", "watch")
		}
	case "List":
		verbs = []string{"list"}
		if cached {
			verbs = append(verbs, "watch")
		}
	case "Apply":
		// Server-side apply is a PATCH; its apply configuration rarely
		// has a type that names its kind, so it is declared.
		verbs = []string{"patch"}
	case "Create", "Patch", "Update", "Delete", "DeleteAllOf":
		verbs = []string{strings.ToLower(fn.Name())}
		if fn.Name() == "DeleteAllOf" {
			verbs = []string{"deletecollection"}
		}
	default:
		return
	}
	f.object(fset, info, call, arg, sub, verbs...)
}

// isEmbeddedClient: r.Get where r embeds client.Client.
func isEmbeddedClient(info *types.Info, sel *ast.SelectorExpr) bool {
	s, ok := info.Selections[sel]
	if !ok || len(s.Index()) < 2 {
		return false
	}
	return true
}

func (f *finder) object(fset *token.FileSet, info *types.Info, call *ast.CallExpr, arg int, sub string, verbs ...string) {
	if arg >= len(call.Args) {
		return
	}
	t := info.TypeOf(call.Args[arg])
	gvk, ok := f.kindOf(t)
	if !ok {
		pos := fset.Position(call.Pos())
		f.unresolved = append(f.unresolved, Unresolved{
			Func:  f.fn,
			Call:  fmt.Sprintf("%s(%s)", types.ExprString(call.Fun), types.TypeString(t, nil)),
			Where: fmt.Sprintf("%s:%d", shortPath(pos.Filename), pos.Line),
		})
		return
	}
	f.add(fset, call.Pos(), gvk, sub, verbs...)
}
