// wordstats counts lines, words and bytes of the workspace files whose path matches a
// pattern: the example tool of the airlock SDK, as its SPEC.md specifies. A WASI preview 1
// command: the workspace is the current directory, the arguments come on stdin (airlock.go).

package main

import (
	"io"
	"io/fs"
	"os"
	"sort"
)

// Arguments are the call's arguments, as schema.json describes them (the daemon has
// validated them already). A pointer field is nil when the argument is absent.
type Arguments struct {
	Pattern string `json:"pattern"`
	Options struct {
		MaxFiles *int  `json:"max_files"`
		PerFile  *bool `json:"per_file"`
	} `json:"options"`
}

// Counts are the figures of one file, or of several.
type Counts struct {
	Lines int `json:"lines"`
	Words int `json:"words"`
	Bytes int `json:"bytes"`
}

// FileCounts are one file's figures (the Counts fields are inlined in JSON).
type FileCounts struct {
	Path string `json:"path"`
	Counts
}

// Totals sum the counted files.
type Totals struct {
	Files int `json:"files"`
	Counts
}

// Result is the tool's result: Files is left out unless per_file.
type Result struct {
	Totals    Totals        `json:"totals"`
	Truncated bool          `json:"truncated"`
	Files     *[]FileCounts `json:"files,omitempty"`
}

func main() {
	Run(tool)
}

// tool runs one call. (Not named after the tool: its name may be a Go keyword.)
func tool(args Arguments) (any, error) {
	maxFiles, perFile := 100, true
	if args.Options.MaxFiles != nil {
		maxFiles = *args.Options.MaxFiles
	}
	if args.Options.PerFile != nil {
		perFile = *args.Options.PerFile
	}

	if err := RequireWorkspace(); err != nil {
		return nil, err
	}
	var found []string
	if err := walk("", func(path string) {
		if matches([]rune(args.Pattern), []rune(path)) {
			found = append(found, path)
		}
	}); err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, Fail("no file matches %s", args.Pattern)
	}
	sort.Strings(found) // byte order

	counted := found
	if len(counted) > maxFiles {
		counted = counted[:maxFiles]
	}
	files := make([]FileCounts, 0, len(counted))
	var totals Totals
	for _, path := range counted {
		counts, err := count(path)
		if err != nil {
			return nil, err
		}
		files = append(files, FileCounts{Path: path, Counts: counts})
		totals.Files++
		totals.Lines += counts.Lines
		totals.Words += counts.Words
		totals.Bytes += counts.Bytes
	}
	result := Result{Totals: totals, Truncated: len(found) > maxFiles}
	if perFile {
		result.Files = &files
	}
	return result, nil
}

// walk calls visit with the path of every regular file below the directory prefix ("" is
// the workspace), relative and '/'-separated. Entries whose name starts with '.' are skipped;
// a symlink counts when it leads to a regular file inside the workspace (symlinked folders
// are not followed); anything else is skipped.
func walk(prefix string, visit func(path string)) error {
	dir := prefix
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		if entry.Name()[0] == '.' {
			continue
		}
		path := prefix + entry.Name()
		switch kind := entry.Type(); {
		case kind.IsDir():
			if err := walk(path+"/", visit); err != nil {
				return err
			}
		case kind.IsRegular():
			visit(path)
		case kind&fs.ModeSymlink != 0:
			if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
				visit(path)
			}
		}
	}
	return nil
}

// matches tells whether the whole path matches pattern: '*' matches any run of characters
// ('/' included), '?' exactly one, any other character itself.
func matches(pattern, path []rune) bool {
	p, s := 0, 0
	star, resume := -1, 0 // the last '*' seen, and where in path its match would grow
	for s < len(path) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == path[s]) && pattern[p] != '*':
			p, s = p+1, s+1
		case p < len(pattern) && pattern[p] == '*':
			star, resume = p, s
			p++
		case star >= 0:
			resume++
			p, s = star+1, resume
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// count returns the figures of one file, read as bytes (never decoded) and streamed through
// a small buffer, so that a large file does not need as much memory (the sandbox limits it).
func count(path string) (Counts, error) {
	file, err := os.Open(path)
	if err != nil {
		return Counts{}, err
	}
	defer file.Close()
	var counter counter
	if _, err := io.Copy(&counter, file); err != nil {
		return Counts{}, err
	}
	if counter.Bytes > 0 && counter.last != '\n' {
		counter.Lines++ // a last line without its newline
	}
	return counter.Counts, nil
}

// counter counts what is written to it.
type counter struct {
	Counts
	inWord bool
	last   byte
}

func (c *counter) Write(data []byte) (int, error) {
	for _, b := range data {
		switch b {
		case '\n':
			c.Lines++
			c.inWord = false
		case ' ', '\t', '\r', '\v', '\f':
			c.inWord = false
		default:
			if !c.inWord {
				c.inWord = true
				c.Words++
			}
		}
	}
	if len(data) > 0 {
		c.last = data[len(data)-1]
	}
	c.Bytes += len(data)
	return len(data), nil
}
