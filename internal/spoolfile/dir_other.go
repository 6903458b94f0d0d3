//go:build unix && !linux

package spoolfile

// openTmpfile reports that unnamed temp files are unavailable here.
func openTmpfile(int) (int, error) { return -1, errNoTmpfile }

// linkTmpfile is never called when openTmpfile fails.
func linkTmpfile(int, int, string) error { return errNoTmpfile }

// syncFilesystem is never called: syncfsReportsErrors is false.
func syncFilesystem(int) error { return errNoTmpfile }

func syncfsReportsErrors() bool { return false }
