package reports

import (
	"embed"
	"fmt"
	"io/fs"
)

// EchartsVersion is the version of Apache ECharts the HTML reports embed
// (see assets/README.md). Stay on 5.6.x: 6.x changes the default layout.
const EchartsVersion = "5.6.0"

// echartsFile is the name the pages load the library by, relative to
// themselves.
const echartsFile = "echarts.min.js"

//go:embed assets/echarts.min.js assets/LICENSE assets/NOTICE assets/LICENSE-d3
var assets embed.FS

// assetFiles maps each embedded file to the name it is written under, next
// to the pages: the library and the licence terms that must travel with it.
var assetFiles = []struct{ src, dst string }{
	{"assets/echarts.min.js", echartsFile},
	{"assets/LICENSE", "echarts-LICENSE.txt"},
	{"assets/NOTICE", "echarts-NOTICE.txt"},
	{"assets/LICENSE-d3", "echarts-LICENSE-d3.txt"},
}

// assetContents returns the files to write beside the pages.
func assetContents() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, a := range assetFiles {
		b, err := fs.ReadFile(assets, a.src)
		if err != nil {
			return nil, fmt.Errorf("reports: embedded %s: %w", a.src, err)
		}
		out[a.dst] = b
	}
	return out, nil
}
