// Package svgplot draws the few charts the benchmark report needs — line
// charts (one line per contender, optional log scales) and grouped bar
// charts — as small, self-contained SVG documents. It has no dependencies
// beyond the standard library and no knowledge of benchmarks.
package svgplot
