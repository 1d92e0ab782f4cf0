" .wf files are wf workflows.
autocmd BufRead,BufNewFile *.wf setfiletype wf
