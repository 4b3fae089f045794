package fstools

// The mkfsOptions volume parameter, checked against an allow-list. mkfs
// runs as root on the node, outside any container, so an option that
// names a file or a device would let whoever writes a StorageClass (or
// crafts a volume context) read or write the host: mke2fs -d copies a
// directory into the new file system, -z writes an undo file, -l reads a
// bad blocks list, -J device= and mkfs.xfs -l logdev=, -r rtdev=, -p and
// -c name other files. Only options that tune the file system made on
// the volume itself are taken; everything else is refused by name.
//
// The options are parsed as getopt(3) parses them, so the check sees
// exactly what the program will: "-m0" and "-m 0" alike, clustered
// flags ("-qF"), and an option's argument taken whole even when it
// starts with a dash. Operands (anything not an option) are refused: the
// device is always the node's.

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// errMkfsOption marks an mkfsOptions value that is refused.
var errMkfsOption = errors.New("mkfsOptions")

// Checks of option and sub-option values.
var (
	// A count or size: digits, with a fraction and a unit suffix as
	// mke2fs and mkfs.xfs read them ("0.5", "64k", "1g", "128b").
	numberValue = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[a-zA-Z]?$`)
	// A word: a name, a UUID, a uid:gid, a list of features or types.
	wordValue = regexp.MustCompile(`^[A-Za-z0-9_.:+^,-]+$`)
)

// valueCheck checks the argument of an option or the value of a
// sub-option; nil for options and sub-options without one.
type valueCheck func(string) bool

func isNumber(v string) bool { return numberValue.MatchString(v) }
func isWord(v string) bool   { return wordValue.MatchString(v) }

// isLabel accepts a volume label: printable, no path separator.
func isLabel(v string) bool {
	if v == "" || len(v) > 255 {
		return false
	}
	for _, c := range v {
		if c < 0x21 || c == 0x7f || c == '/' {
			return false
		}
	}
	return true
}

func oneOf(values ...string) valueCheck {
	return func(v string) bool { return slices.Contains(values, v) }
}

// subOption is an allowed sub-option of an option such as mke2fs -E or
// mkfs.xfs -d: with a value (value != nil) or a bare flag; optional says
// the value may be left out ("lazy_itable_init" and "lazy_itable_init=1").
type subOption struct {
	value    valueCheck
	optional bool
}

// mkfsOption is an allowed option letter of a mkfs program.
type mkfsOption struct {
	// arg says the option takes an argument (getopt's "x:").
	arg bool
	// value checks a plain argument.
	value valueCheck
	// sub, when set, makes the argument a comma-separated list of
	// sub-options, each of which must be listed.
	sub map[string]subOption
}

var (
	numSub  = subOption{value: isNumber}
	boolSub = subOption{value: oneOf("0", "1"), optional: true}
	flagSub = subOption{}
)

// mke2fsOptions are the options of mke2fs (mkfs.ext4) that may be given.
// Refused among others: -c (bad block scan), -d (populate from a
// directory), -D, -l (bad blocks file), -M (last mounted directory),
// -n and -S (no file system made), -o, -t (the file system type is the
// volume's), -V, -z (undo file), -e panic (a file system error would
// take the whole node down), -J device=, -E offset= and test_fs.
var mke2fsOptions = map[byte]mkfsOption{
	'b': {arg: true, value: isNumber},
	'C': {arg: true, value: isNumber},
	'e': {arg: true, value: oneOf("continue", "remount-ro")},
	'E': {arg: true, sub: map[string]subOption{
		"lazy_itable_init":         boolSub,
		"lazy_journal_init":        boolSub,
		"assume_storage_prezeroed": boolSub,
		"packed_meta_blocks":       boolSub,
		"discard":                  flagSub,
		"nodiscard":                flagSub,
		"no_copy_xattrs":           flagSub,
		"stride":                   numSub,
		"stripe_width":             numSub,
		"stripe-width":             numSub,
		"resize":                   numSub,
		"num_backup_sb":            {value: oneOf("0", "1", "2")},
		"mmp_update_interval":      numSub,
		"orphan_file_size":         numSub,
		"root_owner":               {value: isWord, optional: true},
		"quotatype":                {value: isWord},
		"encoding":                 {value: isWord},
		"encoding_flags":           {value: isWord},
	}},
	'F': {},
	'g': {arg: true, value: isNumber},
	'G': {arg: true, value: isNumber},
	'i': {arg: true, value: isNumber},
	'I': {arg: true, value: isNumber},
	'j': {},
	'J': {arg: true, sub: map[string]subOption{
		"size":             numSub,
		"fast_commit_size": numSub,
		"location":         numSub,
	}},
	'L': {arg: true, value: isLabel},
	'm': {arg: true, value: isNumber},
	'N': {arg: true, value: isNumber},
	'O': {arg: true, value: isWord},
	'q': {},
	'r': {arg: true, value: oneOf("0", "1")},
	'T': {arg: true, value: isWord},
	'U': {arg: true, value: isWord},
	'v': {},
}

// mkfsXFSOptions are the options of mkfs.xfs that may be given. Refused
// among others: -c (configuration file), -p (prototype file), -r (a
// realtime device), -N (no file system made), -V, -d file/name,
// -l logdev/file/name and an external log (internal=0).
var mkfsXFSOptions = map[byte]mkfsOption{
	'b': {arg: true, sub: map[string]subOption{"size": numSub, "log": numSub}},
	'd': {arg: true, sub: map[string]subOption{
		"agcount":      numSub,
		"agsize":       numSub,
		"cowextsize":   numSub,
		"size":         numSub,
		"sunit":        numSub,
		"su":           numSub,
		"swidth":       numSub,
		"sw":           numSub,
		"noalign":      flagSub,
		"projinherit":  numSub,
		"extszinherit": numSub,
		"daxinherit":   boolSub,
	}},
	'f': {},
	'i': {arg: true, sub: map[string]subOption{
		"size":        numSub,
		"log":         numSub,
		"perblock":    numSub,
		"maxpct":      numSub,
		"align":       boolSub,
		"attr":        numSub,
		"projid32bit": boolSub,
		"sparse":      boolSub,
		"nrext64":     boolSub,
	}},
	'K': {},
	'l': {arg: true, sub: map[string]subOption{
		"size":       numSub,
		"version":    numSub,
		"sunit":      numSub,
		"su":         numSub,
		"lazy-count": boolSub,
		"agnum":      numSub,
		"internal":   {value: oneOf("1"), optional: true},
	}},
	'L': {arg: true, value: isLabel},
	'm': {arg: true, sub: map[string]subOption{
		"bigtime":    boolSub,
		"crc":        boolSub,
		"finobt":     boolSub,
		"inobtcount": boolSub,
		"rmapbt":     boolSub,
		"reflink":    boolSub,
		"uuid":       {value: isWord},
	}},
	'n': {arg: true, sub: map[string]subOption{
		"size":    numSub,
		"log":     numSub,
		"version": {value: isWord},
		"ftype":   boolSub,
	}},
	'q': {},
	's': {arg: true, sub: map[string]subOption{"size": numSub, "log": numSub}},
}

// mkfsOptionTables are the allow-lists by file system type.
var mkfsOptionTables = map[string]map[byte]mkfsOption{
	"ext4": mke2fsOptions,
	"xfs":  mkfsXFSOptions,
}

// CheckMkfsOptions checks the mkfsOptions of a volume (split at white
// space, as MkfsArgs splits them) for making fsType. The error names the
// first refused option and wraps errMkfsOption.
func CheckMkfsOptions(fsType, options string) error {
	table, ok := mkfsOptionTables[fsType]
	if !ok {
		return fmt.Errorf("%w: cannot make a %q file system", errMkfsOption, fsType)
	}
	return checkMkfsArgs(fsType, table, strings.Fields(options))
}

// checkMkfsArgs walks args the way getopt(3) does.
func checkMkfsArgs(fsType string, table map[byte]mkfsOption, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" || strings.HasPrefix(a, "--") {
			return fmt.Errorf("%w: %q is not an option mkfs.%s may be given (only options that tune the file system: %s)",
				errMkfsOption, a, fsType, allowedLetters(table))
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			o, ok := table[c]
			if !ok {
				return fmt.Errorf("%w: option -%c is not allowed for %s (allowed: %s)", errMkfsOption, c, fsType, allowedLetters(table))
			}
			if !o.arg {
				continue
			}
			// The rest of the word is the argument, else the next word.
			val := a[j+1:]
			if val == "" {
				if i+1 >= len(args) {
					return fmt.Errorf("%w: option -%c needs a value", errMkfsOption, c)
				}
				i++
				val = args[i]
			}
			if err := o.check(c, val); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// check checks the argument of option -c.
func (o mkfsOption) check(c byte, val string) error {
	if o.sub == nil {
		if !o.value(val) {
			return fmt.Errorf("%w: option -%c has an invalid value %q", errMkfsOption, c, val)
		}
		return nil
	}
	for _, s := range strings.Split(val, ",") {
		name, v, hasValue := strings.Cut(s, "=")
		so, ok := o.sub[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: option -%c %s is not allowed (allowed: %s)", errMkfsOption, c, name, allowedNames(o.sub))
		case hasValue && so.value == nil:
			return fmt.Errorf("%w: option -%c %s takes no value", errMkfsOption, c, name)
		case !hasValue && so.value != nil && !so.optional:
			return fmt.Errorf("%w: option -%c %s needs a value", errMkfsOption, c, name)
		case hasValue && !so.value(v):
			return fmt.Errorf("%w: option -%c %s has an invalid value %q", errMkfsOption, c, name, v)
		}
	}
	return nil
}

func allowedLetters(table map[byte]mkfsOption) string {
	var l []string
	for c := range table {
		l = append(l, "-"+string(c))
	}
	sort.Strings(l)
	return strings.Join(l, " ")
}

func allowedNames(sub map[string]subOption) string {
	var l []string
	for n := range sub {
		l = append(l, n)
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}
