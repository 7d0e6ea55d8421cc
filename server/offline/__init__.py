"""The offline side: scenario files, the offline run (whole runs in compiled code), trace files and progress bars."""
