package sublet_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A code block of the documentation: a package doc comment's indented block, or a
// block of README.md, examples/README.md or docs/*.md.
type docBlock struct {
	file  string // repository-relative path
	line  int    // line of the block's first line in file
	lang  string // a Markdown fence's language; "" for the others
	fence bool   // a fenced Markdown block
	text  string // the code, one line per line of file
}

// A documentation source: its blocks and the declarations its blocks may use besides
// the shared context (docContext): "//doccheck:context DECL" lines in a package doc
// comment (go doc hides such directive lines), "<!-- doccheck:context DECL -->" lines
// in Markdown.
type docSource struct {
	file    string
	blocks  []docBlock
	context []string
}

// docContext declares the names the documentation's fragments use without defining
// them: the device, the model, the data, the optimizer... A block declares its own
// values of these names where it makes them.
const docContext = `var (
	dev    device.Device
	a      *alloc.Allocator
	model  *nn.Sequential
	x, y   *tensor.Tensor
	labels *tensor.Tensor
	opt    optim.Optimizer
	scaler *amp.GradScaler
	step   *tensor.Scope
	steps  int
	epochs int
	f      *os.File
)
`

// goLike says a block that does not parse is meant as Go: it has a := or a call of a
// package's exported function.
var goLike = regexp.MustCompile(`:=|\b[a-z]\w*\.[A-Z]\w*\(`)

// contextDirective is a source's extra context declaration.
var (
	goContextDirective = regexp.MustCompile(`^//doccheck:context (.*)$`)
	mdContextDirective = regexp.MustCompile(`^<!-- doccheck:context (.*) -->$`)
)

// TestDocCodeCompiles builds every Go code block of the documentation: the package
// doc comments, README.md, examples/README.md and docs/*.md. A Markdown ```go block is
// Go; any other block that parses as Go, or looks like Go (a :=, a call of a package's
// function), must be Go that compiles. A block is built as declarations when it is
// declarations, else as the body of a function; the packages it names are imported
// for it, and the names it uses without defining them come from docContext and its
// source's doccheck:context lines. Variables declared and not used are allowed: a
// fragment shows what a call returns.
func TestDocCodeCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the documentation's code")
	}
	problems, built, skipped := buildDocCode(t, append(goDocSources(t), mdDocSources(t)...))
	require.Greater(t, built, 20, "the documentation's packages were built")
	t.Logf("built %d packages; not Go: %s", built, strings.Join(skipped, " "))
	for _, p := range problems {
		t.Error(p)
	}
}

// The checker finds what the issue that asked for it found (a *File passed for a
// *Reader), a block that does not parse, a name a fragment does not define; it passes
// a fragment using the shared context and its source's, and leaves shell lines alone.
func TestDocCodeCheckerFindsErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds code")
	}
	src := docSource{file: "x.md", context: []string{"var path string"}, blocks: []docBlock{
		{file: "x.md", line: 10, text: "r, err := safetensors.Open(path)\nerr = safetensors.LoadModule(r, model)"},
		{file: "x.md", line: 20, text: "opt.Step()\n... each step ...\nopt.ZeroGrad(true)"},
		{file: "x.md", line: 30, text: "out := undefinedThing(x)"},
		{file: "x.md", line: 40, text: "err := safetensors.LoadModuleFile(path, model) // fine\nopt.ZeroGrad(true)"},
		{file: "x.md", line: 50, text: "go run ./examples/mlp\nsublet info"},
		{file: "x.md", line: 60, fence: true, lang: "sh", text: "x := broken("},
	}}
	problems, built, skipped := buildDocCode(t, []docSource{src})
	require.Equal(t, 1, built)
	require.Equal(t, []string{"x.md:50"}, skipped)
	require.Len(t, problems, 3, "%q", problems)
	require.Contains(t, problems[0], "x.md:20: a Go block that does not parse")
	require.Contains(t, problems[1], "x.md:11:")
	require.Contains(t, problems[1], "cannot use r (variable of type *safetensors.File) as *safetensors.Reader value")
	require.Contains(t, problems[2], "x.md:30:")
	require.Contains(t, problems[2], "undefined: undefinedThing")
}

// buildDocCode builds the Go blocks of sources and returns the problems found (file:line
// and the compiler's message), the number of packages built and the blocks that are
// not Go.
func buildDocCode(t *testing.T, sources []docSource) (problems []string, built int, skipped []string) {
	pkgs := importPaths(t)
	dir, err := os.MkdirTemp(".", "_doccheck")
	require.NoError(t, err)
	defer os.RemoveAll(dir)

	var paths []string
	for si, src := range sources {
		var stmts, decls []docBlock
		for _, b := range src.blocks {
			switch {
			case b.fence && b.lang != "" && b.lang != "go":
				continue
			case parsesAs(b.text, true):
				decls = append(decls, b)
			case parsesAs(b.text, false):
				stmts = append(stmts, b)
			case b.lang == "go" || goLike.MatchString(b.text):
				problems = append(problems, fmt.Sprintf("%s:%d: a Go block that does not parse: %v", b.file, b.line, parseError(b.text)))
			default:
				skipped = append(skipped, fmt.Sprintf("%s:%d", b.file, b.line))
			}
		}
		// One package for a source's statement blocks, one for each declaration block
		// (two may declare the same name).
		groups := [][]docBlock{stmts}
		for _, d := range decls {
			groups = append(groups, []docBlock{d})
		}
		for gi, g := range groups {
			if len(g) == 0 {
				continue
			}
			pkg := filepath.Join(dir, fmt.Sprintf("s%03d_%d", si, gi))
			require.NoError(t, os.Mkdir(pkg, 0o755))
			declared := map[string]bool{}
			for bi, b := range g {
				code, names := blockFile(t, b, pkgs, gi > 0)
				for _, n := range names {
					declared[n] = true
				}
				require.NoError(t, os.WriteFile(filepath.Join(pkg, fmt.Sprintf("b%d.go", bi)), []byte(code), 0o644))
			}
			ctx := contextFile(t, src, pkgs, declared)
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "context.go"), []byte(ctx), 0o644))
			paths = append(paths, "./"+filepath.ToSlash(pkg))
		}
	}
	if len(paths) == 0 {
		return problems, 0, skipped
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, append([]string{"build", "-gcflags=-e", "-o", os.DevNull}, paths...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, _ := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, "go: downloading"),
			strings.Contains(line, "declared and not used"):
		case strings.HasPrefix(line, "\t"): // the have/want lines of the message above
			problems[len(problems)-1] += "\n" + line
		case strings.Contains(line, "_doccheck"):
			problems = append(problems, "the doc checker's own code does not build: "+line)
		default:
			problems = append(problems, line)
		}
	}
	return problems, len(paths), skipped
}

// parsesAs says text parses as declarations (decl) or as a function body.
func parsesAs(text string, decl bool) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", wrap(text, decl), parser.SkipObjectResolution)
	return err == nil
}

// parseError is the error text gives as a function body.
func parseError(text string) error {
	_, err := parser.ParseFile(token.NewFileSet(), "", wrap(text, false), parser.SkipObjectResolution)
	return err
}

// wrap makes text a file: declarations at the top level, or the body of a function.
func wrap(text string, decl bool) string {
	if decl {
		return "package p\n" + text + "\n"
	}
	return "package p\nfunc _() {\n{\n" + text + "\n}\n}\n"
}

// blockFile is b as a Go file with the imports of the packages it names, with line
// directives that make the compiler's positions b's own; names are the top-level
// names a declaration block declares.
func blockFile(t *testing.T, b docBlock, pkgs map[string]string, decl bool) (code string, names []string) {
	body := "//line " + b.file + ":" + fmt.Sprint(b.line) + "\n" + b.text + "\n"
	if !decl {
		body = "func _() {\n{\n" + body + "}\n}\n"
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", "package p\n"+body, 0)
	require.NoError(t, err)
	if decl {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names = append(names, n.Name)
						}
					case *ast.TypeSpec:
						names = append(names, s.Name.Name)
					}
				}
			}
		}
	}
	return "package p\n\n" + imports(f, pkgs) + body, names
}

// contextFile declares docContext and src's context: a name of docContext that src
// declares again, or that a block declares at the top level, is left out.
func contextFile(t *testing.T, src docSource, pkgs map[string]string, declared map[string]bool) string {
	var kept []string
	add := func(decls string, skip map[string]bool) map[string]bool {
		f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+decls, 0)
		require.NoError(t, err, "%s: its doccheck:context lines", src.file)
		names := map[string]bool{}
		text := func(n ast.Node) string {
			return decls[int(n.Pos())-len("package p\n")-1 : int(n.End())-len("package p\n")-1]
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			require.True(t, ok, "%s: a doccheck:context line declares a function; declare a variable of function type", src.file)
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
						if !skip[n.Name] && !declared[n.Name] {
							kept = append(kept, "var "+n.Name+" "+text(s.Type))
						}
					}
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					kept = append(kept, "type "+text(s))
				}
			}
		}
		return names
	}
	mine := add(strings.Join(src.context, "\n"), nil)
	add(docContext, mine)
	code := strings.Join(kept, "\n") + "\n"
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+code, 0)
	require.NoError(t, err)
	return "package p\n\n" + imports(f, pkgs) + code
}

// imports is the import declaration for the packages f names and does not declare.
func imports(f *ast.File, pkgs map[string]string) string {
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{n.Key, n.Value} {
				if id, ok := e.(*ast.Ident); ok && n.Tok == token.DEFINE {
					declared[id.Name] = true
				}
			}
		}
		return true
	})
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !declared[id.Name] && pkgs[id.Name] != "" {
				used[id.Name] = true
			}
		}
		return true
	})
	if len(used) == 0 {
		return ""
	}
	var lines []string
	for name := range used {
		lines = append(lines, fmt.Sprintf("\t%s %q", name, pkgs[name]))
	}
	sort.Strings(lines)
	return "import (\n" + strings.Join(lines, "\n") + "\n)\n\n"
}

// importPaths maps a package name the documentation uses to its import path: the
// module's packages (device/cpu and device/cuda for cpu and cuda), the standard
// library's and Prometheus' that the docs use.
func importPaths(t *testing.T) map[string]string {
	pkgs := map[string]string{
		"errors": "errors", "fmt": "fmt", "os": "os", "io": "io", "http": "net/http",
		"time": "time", "context": "context", "log": "log", "bytes": "bytes",
		"gorgonia":   "gorgonia.org/tensor",
		"prometheus": "github.com/prometheus/client_golang/prometheus",
		"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
	}
	const module = "github.com/subletml/sublet"
	for _, f := range goFiles(t) {
		if strings.HasSuffix(f, "_test.go") || strings.Contains(f, "internal/") || strings.HasPrefix(f, "examples/") || strings.HasPrefix(f, "cmd/") {
			continue
		}
		dir := filepath.Dir(f)
		name := filepath.Base(dir)
		if dir == "." || strings.Contains(dir, "testdata") || strings.HasPrefix(name, "_") {
			continue
		}
		path := module + "/" + filepath.ToSlash(dir)
		if old, ok := pkgs[name]; ok && old != path && !strings.HasPrefix(path, module+"/device/") {
			continue // kernels/cpu and kernels/cuda: the docs mean the devices
		}
		pkgs[name] = path
	}
	return pkgs
}

// goDocSources are the package doc comments of the module's packages.
func goDocSources(t *testing.T) []docSource {
	var out []docSource
	for _, f := range goFiles(t) {
		if strings.HasSuffix(f, "_test.go") || strings.Contains(f, "_doccheck") || strings.Contains(f, "internal/") {
			continue // internal packages' docs are for the module's own code
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		fset := token.NewFileSet()
		pf, err := parser.ParseFile(fset, f, src, parser.ParseComments|parser.PackageClauseOnly)
		require.NoError(t, err)
		if pf.Doc == nil {
			continue
		}
		ds := docSource{file: f}
		var cur *docBlock
		flush := func() {
			if cur != nil {
				cur.text = strings.TrimRight(cur.text, "\n")
				ds.blocks = append(ds.blocks, *cur)
				cur = nil
			}
		}
		pending := 0 // blank comment lines after the block's last line
		for _, c := range pf.Doc.List {
			line := fset.Position(c.Slash).Line
			switch {
			case goContextDirective.MatchString(c.Text):
				ds.context = append(ds.context, goContextDirective.FindStringSubmatch(c.Text)[1])
				continue
			case strings.HasPrefix(c.Text, "//\t"):
				if cur == nil {
					cur = &docBlock{file: f, line: line}
				}
				cur.text += strings.Repeat("\n", pending) + strings.TrimPrefix(c.Text, "//\t") + "\n"
				pending = 0
			case strings.TrimSpace(c.Text) == "//" && cur != nil:
				pending++
			default:
				flush()
				pending = 0
			}
		}
		flush()
		if len(ds.blocks) > 0 || len(ds.context) > 0 {
			out = append(out, ds)
		}
	}
	return out
}

// mdDocSources are README.md, examples/README.md and docs/*.md.
func mdDocSources(t *testing.T) []docSource {
	files, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	files = append([]string{"README.md", "examples/README.md"}, files...)
	var out []docSource
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		ds := docSource{file: f}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		var cur *docBlock
		n, prevBlank := 0, true
		for sc.Scan() {
			n++
			l := sc.Text()
			switch {
			case cur != nil && cur.fence:
				if strings.HasPrefix(strings.TrimSpace(l), "```") {
					ds.blocks = append(ds.blocks, *cur)
					cur = nil
				} else {
					cur.text += l + "\n"
				}
			case strings.HasPrefix(l, "```"):
				cur = &docBlock{file: f, line: n + 1, fence: true, lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
			case mdContextDirective.MatchString(l):
				ds.context = append(ds.context, mdContextDirective.FindStringSubmatch(l)[1])
			case (strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")) && (cur != nil || prevBlank):
				if cur == nil {
					cur = &docBlock{file: f, line: n}
				}
				cur.text += strings.TrimPrefix(strings.TrimPrefix(l, "    "), "\t") + "\n"
			case cur != nil && strings.TrimSpace(l) == "":
				cur.text += "\n"
			default:
				if cur != nil {
					cur.text = strings.TrimRight(cur.text, "\n")
					ds.blocks = append(ds.blocks, *cur)
					cur = nil
				}
			}
			prevBlank = strings.TrimSpace(l) == ""
		}
		require.NoError(t, sc.Err())
		fh.Close()
		if cur != nil {
			ds.blocks = append(ds.blocks, *cur)
		}
		out = append(out, ds)
	}
	return out
}
