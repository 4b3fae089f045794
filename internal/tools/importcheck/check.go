package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"strings"
)

// class is the kind of an import path; groups must appear in this order.
type class int

const (
	classStd   class = iota // the standard library
	classOther              // any other module
	classLocal              // this module
)

func (c class) String() string {
	return [...]string{"standard library", "third-party", "this module's"}[c]
}

// classify says which group path belongs in: a path whose first element
// has no dot is the standard library's.
func classify(path, module string) class {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return classLocal
	case !strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return classStd
	default:
		return classOther
	}
}

// Problem is one grouping fault, at the import that shows it.
type Problem struct {
	Pos token.Position
	Msg string
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s", p.Pos, p.Msg) }

// checkSource parses one Go file's imports and reports every import that
// breaks the grouping: standard library first, then third-party, then
// this module's, each kind in one group of its own, groups separated by a
// blank line.
func checkSource(filename string, src []byte, module string) ([]Problem, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parsing imports: %w", err)
	}
	var (
		problems []Problem
		prevEnd  = -1        // line where the previous import ended
		group    = class(-1) // class of the current group
		highest  = class(-1) // highest class of the groups so far
		seen     = map[class]bool{}
	)
	for _, spec := range f.Imports {
		path := strings.Trim(spec.Path.Value, "`\"")
		c := classify(path, module)
		pos := fset.Position(spec.Path.Pos())
		start := pos.Line
		if spec.Doc != nil {
			start = fset.Position(spec.Doc.Pos()).Line
		}
		newGroup := prevEnd < 0 || start > prevEnd+1
		prevEnd = fset.Position(spec.End()).Line
		switch {
		case !newGroup:
			if c != group {
				problems = append(problems, Problem{pos, fmt.Sprintf("%s import %s in a group of %s imports", c, path, group)})
			}
			continue
		case seen[c]:
			problems = append(problems, Problem{pos, fmt.Sprintf("a second group of %s imports starts with %s", c, path)})
		case c < highest:
			problems = append(problems, Problem{pos, fmt.Sprintf("%s imports (%s) after %s imports", c, path, highest)})
		}
		group, seen[c] = c, true
		highest = max(highest, c)
	}
	return problems, nil
}
