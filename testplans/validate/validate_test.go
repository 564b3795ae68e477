package validate

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/BurntSushi/toml"
	"github.com/testground/testground/pkg/api"
)

// What every plan must declare.
var (
	wantBuilders = []string{"exec:go", "docker:go"}
	wantRunners  = []string{"local:exec", "local:docker", "cluster:k8s"}
)

// configKeys are the keys Testground's configuration type for each
// builder and runner ID accepts, with each field's Go type.
type configKeys map[string]map[string]string

// readConfigTypes parses Testground's pkg/build and pkg/runner sources:
// for every type with an ID() method returning a string literal and a
// ConfigType() returning reflect.TypeOf(T{}), it records T's toml keys.
func readConfigTypes(t *testing.T) configKeys {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/testground/testground").Output()
	if err != nil {
		t.Fatalf("locating testground's source: %v", err)
	}
	root := strings.TrimSpace(string(out))
	keys := configKeys{}
	for _, pkg := range []string{"pkg/build", "pkg/runner"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}     // receiver type -> ID
		cfgType := map[string]string{} // receiver type -> config type
		structs := map[string]*ast.StructType{}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					switch d := d.(type) {
					case *ast.GenDecl:
						for _, s := range d.Specs {
							if ts, ok := s.(*ast.TypeSpec); ok {
								if st, ok := ts.Type.(*ast.StructType); ok {
									structs[ts.Name.Name] = st
								}
							}
						}
					case *ast.FuncDecl:
						if d.Recv == nil || len(d.Recv.List) != 1 || d.Body == nil || len(d.Body.List) != 1 {
							continue
						}
						recv := typeName(d.Recv.List[0].Type)
						ret, ok := d.Body.List[0].(*ast.ReturnStmt)
						if !ok || len(ret.Results) != 1 {
							continue
						}
						switch d.Name.Name {
						case "ID":
							if lit, ok := ret.Results[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								ids[recv], _ = strconv.Unquote(lit.Value)
							}
						case "ConfigType":
							// reflect.TypeOf(T{})
							if call, ok := ret.Results[0].(*ast.CallExpr); ok && len(call.Args) == 1 {
								if cl, ok := call.Args[0].(*ast.CompositeLit); ok {
									cfgType[recv] = typeName(cl.Type)
								}
							}
						}
					}
				}
			}
		}
		for recv, id := range ids {
			st := structs[cfgType[recv]]
			if st == nil {
				continue
			}
			fields := map[string]string{}
			for _, f := range st.Fields.List {
				if f.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(f.Tag.Value)
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("toml"), ",")
				if name != "" && name != "-" {
					fields[name] = typeName(f.Type)
				}
			}
			keys[id] = fields
		}
	}
	for _, id := range append(slices.Clone(wantBuilders), wantRunners...) {
		if _, ok := keys[id]; !ok {
			t.Fatalf("no configuration type found for %s in testground's source (found %v)", id, keys)
		}
	}
	return keys
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return typeName(e.X) + "." + e.Sel.Name
	case *ast.ArrayType:
		return "[]" + typeName(e.Elt)
	case *ast.MapType:
		return "map[" + typeName(e.Key) + "]" + typeName(e.Value)
	}
	return "?"
}

// checkConfig checks a manifest's builder or runner table against the
// configuration type: known keys (and the manifests' "enabled"), values
// of the field's kind.
func checkConfig(t *testing.T, where string, cfg map[string]any, fields map[string]string) {
	for k, v := range cfg {
		if k == "enabled" {
			if _, ok := v.(bool); !ok {
				t.Errorf("%s: enabled = %v is not a bool", where, v)
			}
			continue
		}
		typ, ok := fields[k]
		if !ok {
			t.Errorf("%s: unknown key %q (Testground knows %v)", where, k, slices.Sorted(mapKeys(fields)))
			continue
		}
		var good bool
		switch typ {
		case "string":
			_, good = v.(string)
		case "bool":
			_, good = v.(bool)
		case "int", "int64", "uint", "uint64":
			_, good = v.(int64)
		default:
			good = true
		}
		if !good {
			t.Errorf("%s: %s = %v (%T), want a %s", where, k, v, v, typ)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func loadManifest(t *testing.T, path string) *api.TestPlanManifest {
	var m api.TestPlanManifest
	md, err := toml.DecodeFile(path, &m)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, k := range md.Undecoded() {
		// [defaults] is the Testground CLI's, not the daemon's.
		if k[0] != "defaults" {
			t.Errorf("%s: key %s is not part of a Testground manifest", path, k)
		}
	}
	return &m
}

// loadComposition reads a composition as the Testground CLI does: run as
// a text/template with the environment, then decoded.
func loadComposition(t *testing.T, path string) *api.Composition {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := template.New("composition").Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var b bytes.Buffer
	if err := tpl.Execute(&b, map[string]any{"Env": env}); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var c api.Composition
	md, err := toml.Decode(b.String(), &c)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Errorf("%s: keys Testground does not read: %v", path, u)
	}
	return c.GenerateDefaultRun()
}

func TestManifests(t *testing.T) {
	keys := readConfigTypes(t)
	manifests, _ := filepath.Glob("../*/manifest.toml")
	if len(manifests) < 2 {
		t.Fatalf("found only %v", manifests)
	}
	for _, path := range manifests {
		m := loadManifest(t, path)
		if m.Name != filepath.Base(filepath.Dir(path)) {
			t.Errorf("%s: plan named %q, directory %q", path, m.Name, filepath.Base(filepath.Dir(path)))
		}
		for _, b := range wantBuilders {
			if !m.HasBuilder(b) {
				t.Errorf("%s: builder %s not declared", path, b)
			}
		}
		for _, r := range wantRunners {
			if !m.HasRunner(r) {
				t.Errorf("%s: runner %s not declared", path, r)
			}
		}
		for id, cfg := range m.Builders {
			checkConfig(t, path+" builders."+id, cfg, keys[id])
		}
		for id, cfg := range m.Runners {
			checkConfig(t, path+" runners."+id, cfg, keys[id])
		}
		if len(m.TestCases) == 0 {
			t.Errorf("%s: no test cases", path)
		}
		for _, tc := range m.TestCases {
			if tc.Instances.Minimum < 1 || tc.Instances.Maximum < tc.Instances.Minimum {
				t.Errorf("%s: %s: instances [%d, %d]", path, tc.Name, tc.Instances.Minimum, tc.Instances.Maximum)
			}
			if len(tc.Parameters) == 0 {
				t.Errorf("%s: %s: no parameters", path, tc.Name)
			}
			for name, p := range tc.Parameters {
				if p.Type == "" || p.Description == "" || p.Unit == "" || p.Default == nil {
					t.Errorf("%s: %s: parameter %s lacks a type, description, unit or default: %+v", path, tc.Name, name, p)
				}
			}
		}
	}
}

func TestCompositions(t *testing.T) {
	comps, _ := filepath.Glob("../*/compositions/*.toml")
	if len(comps) < 3 {
		t.Fatalf("found only %v", comps)
	}
	want := map[string]bool{"../amtt/compositions/dsl.toml": false, "../amtt/compositions/lan.toml": false}
	for _, path := range comps {
		if _, ok := want[path]; ok {
			want[path] = true
		}
		c := loadComposition(t, path)
		m := loadManifest(t, filepath.Join("..", c.Global.Plan, "manifest.toml"))
		b, err := c.PrepareForBuild(m)
		if err != nil {
			t.Errorf("%s: PrepareForBuild: %v", path, err)
			continue
		}
		if err := b.ValidateForBuild(); err != nil {
			t.Errorf("%s: ValidateForBuild: %v", path, err)
		}
		_, tc, _ := m.TestCaseByName(c.Global.Case)
		runners := append([]string{c.Global.Runner}, wantRunners...)
		for _, r := range runners {
			rc := *c
			rc.Global.Runner = r
			prepared, err := rc.PrepareForRun(m)
			if err != nil {
				t.Errorf("%s on %s: PrepareForRun: %v", path, r, err)
				continue
			}
			if err := prepared.ValidateForRun(); err != nil {
				t.Errorf("%s on %s: ValidateForRun: %v", path, r, err)
				continue
			}
			for _, run := range prepared.Runs {
				for _, g := range run.Groups {
					for k := range g.TestParams {
						if _, ok := tc.Parameters[k]; !ok {
							t.Errorf("%s: group %s sets %s, which test case %s does not declare", path, g.ID, k, tc.Name)
						}
					}
				}
			}
		}
	}
	for path, seen := range want {
		if !seen {
			t.Errorf("composition %s missing", path)
		}
	}
}
