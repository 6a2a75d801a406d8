package check

import (
	"go/ast"
	"go/token"
	"go/types"

	"github.com/ratelimitgen/ratelimitgen/parser"
)

// collector finds the directives of one package and attaches them to the
// types and methods whose doc comments hold them.
type collector struct {
	pkg   *Package
	diags *parser.ErrorList
	// groups holds the directives of every comment group that has some.
	groups map[*ast.CommentGroup][]*parser.Directive
	// placed marks the groups that sit in a valid place; where says, for
	// some of the others, where they are.
	placed map[*ast.CommentGroup]bool
	where  map[*ast.CommentGroup]string
	// broken marks directives with syntax errors, already reported.
	broken map[*parser.Directive]bool
	// targets are the types with directives of their own, in source order.
	targets []*target
	byType  map[*types.TypeName]*target
	// methods holds method directives by method (the generic origin).
	methods map[*types.Func]*methodDirs
	// constraints holds the build constraint of each file.
	constraints map[string]string
	// bodies are the function bodies, to explain directives inside them.
	bodies []funcBody
	// shared holds the package's shared line declarations by name, and
	// sharedUsed those that a method takes.
	shared     map[string]*parser.Directive
	sharedUsed map[*parser.Directive]bool
}

// target is a named type that gets a decorator.
type target struct {
	obj      *types.TypeName
	typeDirs []*parser.Directive
	// naming is the type's decorator= directive, or nil.
	naming *parser.Directive
	// sharedDirs are the shared lines the type declares (shared= with a
	// limit), which add to each limited method's lines.
	sharedDirs []*parser.Directive
	// limited says a directive of the type or of one of its methods
	// declares a limit.
	limited bool
	// typeDirsUsed says a method without directives of its own is
	// limited by typeDirs.
	typeDirsUsed bool
	pos          token.Position // first directive of the type or of one of its methods
	file         string         // file declaring the type
}

// funcBody is the extent of a function's body.
type funcBody struct {
	name       string
	start, end token.Pos
}

// methodDirs are the directives in the doc comment of one method.
type methodDirs struct {
	owner *types.TypeName // the type declaring the method
	dirs  []*parser.Directive
	file  string
}

func newCollector(pkg *Package, diags *parser.ErrorList) *collector {
	return &collector{
		pkg:         pkg,
		diags:       diags,
		groups:      map[*ast.CommentGroup][]*parser.Directive{},
		placed:      map[*ast.CommentGroup]bool{},
		where:       map[*ast.CommentGroup]string{},
		broken:      map[*parser.Directive]bool{},
		byType:      map[*types.TypeName]*target{},
		methods:     map[*types.Func]*methodDirs{},
		constraints: map[string]string{},
	}
}

// collect parses every comment of the package, attaches the directives and
// reports the misplaced ones. It returns whether the package has any
// directive at all.
func (c *collector) collect() bool {
	for _, f := range c.pkg.Syntax {
		c.parseComments(f)
	}
	if len(c.groups) == 0 {
		return false
	}
	for _, f := range c.pkg.Syntax {
		c.walkFile(f)
	}
	c.reportMisplaced()
	return true
}

func (c *collector) parseComments(f *ast.File) {
	for _, cg := range f.Comments {
		for _, cm := range cg.List {
			d, errs := parser.ParseComment(c.pkg.Fset.Position(cm.Slash), cm.Text)
			*c.diags = append(*c.diags, errs...)
			if d == nil {
				continue
			}
			c.groups[cg] = append(c.groups[cg], d)
			if len(errs) > 0 {
				c.broken[d] = true
			}
		}
	}
}

func (c *collector) walkFile(f *ast.File) {
	file := c.pkg.Fset.Position(f.Package).Filename
	c.constraints[file] = fileConstraint(f, file)
	c.where[f.Doc] = "on the package clause"
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			if decl.Tok == token.TYPE {
				c.typeDecl(decl, file)
			} else {
				c.where[decl.Doc] = "on a " + decl.Tok.String() + " declaration"
			}
		case *ast.FuncDecl:
			if decl.Body != nil {
				c.bodies = append(c.bodies, funcBody{decl.Name.Name, decl.Body.Pos(), decl.Body.End()})
			}
			if decl.Recv == nil {
				c.where[decl.Doc] = "on func " + decl.Name.Name + ", which is not a method"
			} else {
				c.methodDecl(decl, file)
			}
		}
	}
}

func (c *collector) typeDecl(decl *ast.GenDecl, file string) {
	if decl.Lparen.IsValid() {
		c.where[decl.Doc] = "on a grouped type declaration (put it on one of its types)"
	}
	for _, spec := range decl.Specs {
		ts := spec.(*ast.TypeSpec)
		doc := ts.Doc
		if !decl.Lparen.IsValid() {
			doc = decl.Doc
		}
		c.where[ts.Comment] = "after type " + ts.Name.Name + " (put it in the doc comment above)"
		if ts.Assign.IsValid() {
			c.where[doc] = "on alias " + ts.Name.Name + " (put it on the aliased type)"
			continue
		}
		obj, _ := c.pkg.Info.Defs[ts.Name].(*types.TypeName)
		if obj == nil {
			continue
		}
		if dirs := c.take(doc); len(dirs) > 0 {
			c.addTypeDirs(c.target(obj, dirs[0].Pos, file), dirs)
		}
		switch typ := ts.Type.(type) {
		case *ast.InterfaceType:
			c.interfaceMethods(obj, typ, file)
		case *ast.StructType:
			for _, f := range typ.Fields.List {
				c.where[f.Doc] = "on a struct field"
				c.where[f.Comment] = "on a struct field"
			}
		}
	}
}

func (c *collector) interfaceMethods(obj *types.TypeName, it *ast.InterfaceType, file string) {
	for _, field := range it.Methods.List {
		if len(field.Names) == 0 {
			c.where[field.Doc] = "on an embedded interface element (put it on the type or on the methods where they are declared)"
			continue
		}
		name := field.Names[0]
		c.where[field.Comment] = "after method " + name.Name + " (put it in the doc comment above)"
		fn, _ := c.pkg.Info.Defs[name].(*types.Func)
		if fn == nil {
			continue
		}
		c.attachMethod(obj, fn, field.Doc, file)
	}
}

func (c *collector) methodDecl(decl *ast.FuncDecl, file string) {
	fn, _ := c.pkg.Info.Defs[decl.Name].(*types.Func)
	if fn == nil {
		return
	}
	recv := fn.Signature().Recv().Type()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := types.Unalias(recv).(*types.Named)
	if !ok {
		return
	}
	c.attachMethod(named.Obj(), fn, decl.Doc, file)
}

// addTypeDirs adds the directives of a type's doc comment to t: its limits
// and the decorator= that names its decorator.
func (c *collector) addTypeDirs(t *target, dirs []*parser.Directive) {
	for _, d := range dirs {
		switch {
		case d.JoinsShared():
			c.errorf(d.Pos, "shared=%s alone on type %s declares nothing: declare a shared line with its limit (period=, threshold=), or write shared=%s alone on a method to have the method take it", d.Shared, t.obj.Name(), d.Shared)
		case d.Shared != "":
			t.sharedDirs = append(t.sharedDirs, d)
		case d.Decorator == "":
			t.typeDirs = append(t.typeDirs, d)
			t.limited = true
		case c.broken[d]:
			// its errors are reported
		case t.naming != nil:
			c.errorf(d.Pos, "duplicate decorator= for %s", t.obj.Name()).AddNote(t.naming.Pos, "first decorator=%s", t.naming.Decorator)
		default:
			t.naming = d
		}
	}
}

func (c *collector) attachMethod(owner *types.TypeName, fn *types.Func, doc *ast.CommentGroup, file string) {
	var dirs []*parser.Directive
	for _, d := range c.take(doc) {
		if d.Decorator != "" && !c.broken[d] {
			c.errorf(d.Pos, "decorator=%s on method %s: decorator= names the decorator of a type; put it in the doc comment of type %s", d.Decorator, fn.Name(), owner.Name())
			continue
		}
		if d.Shared != "" && !d.JoinsShared() && !c.broken[d] {
			c.errorf(d.Pos, "shared line %s declared on method %s: a shared line is declared once, in the doc comment of a type, whose limited methods all take it; a method of another type takes it with shared=%s alone", d.Shared, fn.Name(), d.Shared)
			continue
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return
	}
	c.target(owner, dirs[0].Pos, file).limited = true
	c.methods[fn.Origin()] = &methodDirs{owner: owner, dirs: dirs, file: file}
}

// take returns the directives of doc and marks them placed.
func (c *collector) take(doc *ast.CommentGroup) []*parser.Directive {
	if doc == nil || c.groups[doc] == nil {
		return nil
	}
	c.placed[doc] = true
	return c.groups[doc]
}

// target returns the target for obj, adding it the first time.
func (c *collector) target(obj *types.TypeName, pos token.Position, file string) *target {
	t := c.byType[obj]
	if t == nil {
		t = &target{obj: obj, pos: pos}
		c.byType[obj] = t
		c.targets = append(c.targets, t)
	}
	if obj.Pos().IsValid() {
		t.file = c.pkg.Fset.Position(obj.Pos()).Filename
	} else {
		t.file = file
	}
	return t
}

func (c *collector) reportMisplaced() {
	for cg, dirs := range c.groups {
		if c.placed[cg] {
			continue
		}
		where := c.where[cg]
		for _, b := range c.bodies {
			if where == "" && b.start <= cg.Pos() && cg.End() <= b.end {
				where = "inside func " + b.name + " (only package-level types can be decorated)"
			}
		}
		if where == "" {
			where = "not in the doc comment of a method or a named type"
		}
		for _, d := range dirs {
			c.diags.Add(d.Pos, "misplaced directive: %s; a directive belongs in the doc comment of an interface method, a method declaration or a named type declaration", where)
		}
	}
}

// errorf reports a diagnostic at pos.
func (c *collector) errorf(pos token.Position, format string, args ...any) *parser.Error {
	return c.diags.Add(pos, format, args...)
}

// typeString writes t relative to the package being generated.
func (c *collector) typeString(t types.Type) string {
	return types.TypeString(t, types.RelativeTo(c.pkg.Types))
}
