"""The tools around the library: the `gsplat-lpt` command line and what it runs.

- `cli`: the command line (bench, analyze, render, calibrate);
- `bench`, `timing`, `frame`: timing the alpha-blending stage on a GPU (3DGS, 2DGS, 3DGUT);
- `analyze`: exact tile workloads and simulated schedules on the CPU;
- `render`: camera paths to images and videos;
- `calibrate`: fitting the cost model's lambda and beta on a GPU;
- `plots`, `metrics`, `output`: figures, image metrics, writing results safely;
- `distributed`: spreading frames over the GPUs of one host (torchrun).

Tools import the library core and the scenes; neither imports the tools.
"""
