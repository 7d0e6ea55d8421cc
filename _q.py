import sys; sys.path.insert(0,"examples")
from electrical_tcu import *
from plant_models.registry import load_plant
tcu=ElectricalTcu(); rows=run_stepwise(tcu)
names=[s.name for s in load_plant(PLANT).outputs]
ix={n:i for i,n in enumerate(names)}
for k in (100,400,600,700,750,800,900,1000,1200,1599):
    r=rows[k]; print(k, *(f"{n}={r[ix[n]]:.3f}" for n in ("w_1","w_2","w_3","w_out","gear","slip_c2","stuck_c2","pressure_c1","pressure_c2")), tcu.trace[k][1:3])
