from mmbu.cli import main

main()
