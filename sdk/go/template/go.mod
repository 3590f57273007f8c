module airlock.local/wordstats

go 1.21
